package server

import (
	"github.com/waisteer/waisteer/internal/answer"
	"github.com/waisteer/waisteer/internal/budget"
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
