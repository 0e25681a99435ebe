package destination

import (
	"errors"
	"net/url"
)

// CleanURLError returns err without the URL that net/url's errors quote
// whole (a broker URL may hold a password): only what is wrong with it.
// Parsers of connection URLs (destination and source packages) pass their
// errors through it before wrapping them.
func CleanURLError(err error) error {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return uerr.Err
	}
	return err
}
