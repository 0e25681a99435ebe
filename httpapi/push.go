package httpapi

import (
	"context"
	"net/http"

	"github.com/heraldhq/herald"
)

// PushBroadcaster is the Web Push service's broadcast source (megaphone):
// *push.Server implements it.
type PushBroadcaster interface {
	BroadcastPut(ctx context.Context, id, version string) error
	BroadcastList(ctx context.Context) (map[string]string, error)
}

// Broadcast limits: ids look like "remote-settings/monitor_changes";
// versions are opaque text the user agent compares for equality.
const (
	maxBroadcastIDLen      = 128
	maxBroadcastVersionLen = 256
)

type broadcastsJSON struct {
	Broadcasts map[string]string `json:"broadcasts"`
}

type broadcastJSON struct {
	ID      string `json:"id"`
	Version string `json:"version"`
}

// pushBroadcastPut serves PUT /v1/push/broadcasts/{id} {"version": "…"}.
func (s *server) pushBroadcastPut(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if err := checkBroadcastID(id); err != nil {
		return err
	}
	body, err := readBody(w, r, s.smallLimit(SmallBodyBytes))
	if err != nil {
		return err
	}
	obj, err := parseBody(body)
	if err != nil {
		return err
	}
	if err := obj.allow("version"); err != nil {
		return err
	}
	var version string
	set, err := obj.str("version", &version)
	if err != nil {
		return err
	}
	if !set {
		return herald.FieldErrorf(herald.CodeMissingField, "version", "version is required")
	}
	if version == "" || len(version) > maxBroadcastVersionLen || !herald.IsCleanText(version) || hasControl(version) {
		return herald.FieldErrorf(herald.CodeInvalidField, "version",
			"version must be 1 to %d printable characters", maxBroadcastVersionLen)
	}
	if err := s.cfg.Push.BroadcastPut(r.Context(), id, version); err != nil {
		return err
	}
	return s.reply(w, http.StatusOK, &broadcastJSON{ID: id, Version: version})
}

// pushBroadcastList serves GET /v1/push/broadcasts.
func (s *server) pushBroadcastList(w http.ResponseWriter, r *http.Request) error {
	v, err := s.cfg.Push.BroadcastList(r.Context())
	if err != nil {
		return err
	}
	if v == nil {
		v = map[string]string{}
	}
	return s.reply(w, http.StatusOK, &broadcastsJSON{Broadcasts: v})
}

// checkBroadcastID allows letters, digits and - _ . / (1 to 128).
func checkBroadcastID(id string) error {
	if id == "" || len(id) > maxBroadcastIDLen {
		return herald.FieldErrorf(herald.CodeInvalidField, "id", "broadcast id must be 1 to %d characters", maxBroadcastIDLen)
	}
	for _, c := range id {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.', c == '/':
		default:
			return herald.FieldErrorf(herald.CodeInvalidField, "id", "broadcast id may hold only letters, digits and - _ . /")
		}
	}
	return nil
}

func hasControl(s string) bool {
	for _, c := range s {
		if c < 0x20 || c == 0x7f {
			return true
		}
	}
	return false
}
