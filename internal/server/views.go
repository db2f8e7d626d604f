package server

import (
	"github.com/waisteer/waisteer/internal/answer"
	"github.com/waisteer/waisteer/internal/budget"
	"github.com/waisteer/waisteer/internal/dashboard"
	"github.com/waisteer/waisteer/internal/roomsteer"
	"github.com/waisteer/waisteer/internal/view"
)

// The operator's views, kept under their former names (internal/view).
// SteerLimits are the steering routes' budgets (budget.Config).
type SteerLimits = budget.Config

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

// ManifestType is the media type of a steering manifest (answer.ManifestType).
const ManifestType = answer.ManifestType

// RoomConfig is one room the server steers (roomsteer.Config).
type RoomConfig = roomsteer.Config

// RoomChecks are the health checks of a room's pathways (roomsteer.Checks).
type RoomChecks = roomsteer.Checks

// The dashboard's answers, kept under their former names (internal/dashboard).
type (
	DashboardState = dashboard.State
	Inspection     = dashboard.Inspection
)
