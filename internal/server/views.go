package server

import (
	"github.com/waisteer/waisteer/internal/dashboard"
	"github.com/waisteer/waisteer/internal/view"
)

// The operator's views, kept under their former names (internal/view).
type (
	Status          = view.Status
	PolicyStatus    = view.PolicyStatus
	PathwayStatus   = view.PathwayStatus
	DecisionsStatus = view.DecisionsStatus
	RecordsStatus   = view.RecordsStatus
	PoolView        = view.PoolView
	EdgeChange      = view.EdgeChange
	EdgeView        = view.EdgeView
	HealthView      = view.HealthView
	FrontStatus     = view.FrontStatus
	PoolHeadroom    = view.PoolHeadroom
	QoEView         = view.QoEView
	QoESettings     = view.QoESettings
	QoECell         = view.QoECell
	QoEMove         = view.QoEMove
	LimitedView     = view.LimitedView
	Epoch           = view.Epoch
	ReportsAnswer   = view.ReportsAnswer
)

// The dashboard's answers, kept under their former names (internal/dashboard).
type (
	DashboardState = dashboard.State
	Inspection     = dashboard.Inspection
)
