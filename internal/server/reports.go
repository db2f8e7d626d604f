package server

import (
	"net/http"
	"time"

	"github.com/waisteer/waisteer/internal/answer"
	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/web"
	"github.com/waisteer/waisteer/report/qoe"
)

// cohortHeaderOf is the first value of a cohort header, "" for none.
func cohortHeaderOf(r *http.Request, name string) string {
	if name == "" {
		return ""
	}
	if v := r.Header[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// serveReports answers a POST of a CMCD v2 event report to a steering
// route: the steerer's QoE watch takes it (qoewatch), or 405 for a
// steerer that does not steer by QoE.
func (s *Server) serveReports(w http.ResponseWriter, r *http.Request, st steerer) {
	answer.Headers(w)
	wt, ids, cohort := st.ReportsTo(r)
	if wt == nil {
		w.Header().Set("Allow", "GET, OPTIONS")
		web.Refuse(w, api.Errorf(api.MethodNotAllowed, "a steering request is a GET (§4); %s does not steer by what players report, and takes no reports", st.Label()))
		return
	}
	// Behind trusted proxies, the client they name.
	wt.ServeReports(w, r, ids, cohort, qoe.ClientOf(s.clientAddr(r)), time.UnixMicro(int64(s.clock())))
}
