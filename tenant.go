package herald

// MaxTenantLen is the longest tenant id.
const MaxTenantLen = 64

// ValidTenant reports whether t is a usable tenant id: 1 to MaxTenantLen
// characters of [A-Za-z0-9._-]. The alphabet keeps tenant ids safe in
// URLs, query strings, log lines and metric labels without escaping.
func ValidTenant(t string) bool {
	if len(t) < 1 || len(t) > MaxTenantLen {
		return false
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
