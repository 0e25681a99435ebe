package store

import (
	"encoding/json"
	"time"
)

// PortalLinkRetention is how long a used or expired portal link is kept
// before PortalLinkCreate deletes it (links are small; a day keeps them
// around for an operator looking into a "my link did not work").
const PortalLinkRetention = 24 * time.Hour

// PortalLinkCreateParams are the inputs of PortalLinkCreate.
type PortalLinkCreateParams struct {
	// ID is the link's id (herald.PrefixPortalLink…); Hash is
	// hex(sha256(link token)): the token itself is never stored.
	ID, Hash string
	Tenant   string
	// Theme is the portal's theme as JSON (an object), or nil.
	Theme     json.RawMessage
	ExpiresAt time.Time
	Now       time.Time
}

// PortalLinkConsumeParams are the inputs of PortalLinkConsume.
type PortalLinkConsumeParams struct {
	Hash string
	Now  time.Time
}

// PortalLink is a stored portal link (ADR 0015).
type PortalLink struct {
	ID        string
	Hash      string
	Tenant    string
	Theme     json.RawMessage
	CreatedAt time.Time
	ExpiresAt time.Time
	// UsedAt is when the link was exchanged for a session (nil: unused).
	UsedAt *time.Time
}
