// Package view holds what the server's operator routes answer, as JSON: a
// room's status, a pool's view, the front's status, the QoE and budget
// counts, the log's epochs, a report's answer. It is types only: every
// capability writes its own part of a view, the server assembles them, and
// the clients (internal/client, the dashboard, the CLI) read them. It
// computes nothing but HealthOf, and imports no capability.
package view
