package httpapi

import (
	"context"
	"net/http"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/push"
)

// Web Push broadcasts: PUT /v1/push/broadcasts/{id} and GET
// /v1/push/broadcasts.

// PushBroadcaster is the Web Push service's broadcast source (megaphone):
// *push.Server implements it.
type PushBroadcaster interface {
	BroadcastPut(ctx context.Context, id, version string) error
	BroadcastList(ctx context.Context) (map[string]string, error)
}

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
	// Checked before the body is read; an id is valid with any valid
	// version.
	if err := push.CheckBroadcast(id, "v"); err != nil {
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
	if err := push.CheckBroadcast(id, version); err != nil {
		return err
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
