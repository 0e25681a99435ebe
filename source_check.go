package herald

import (
	"errors"
	"fmt"
	"strings"
)

// CheckSource checks the shape of a source: its name, type, connection
// name, the fields of its type (and none of another type's), prefetch and
// tenant. The mapping's expressions are compiled by the caller
// (filter.CompileMapping). Errors are *Error naming the field.
func CheckSource(s *Source) error {
	if !ValidConnectionName(s.Name) {
		return FieldErrorf(CodeInvalidField, "name",
			"name must be 1 to %d characters of A-Z, a-z, 0-9, '.', '_' and '-', starting with a letter or digit", MaxConnectionNameLen)
	}
	if !s.Type.UsesConnection() {
		return FieldErrorf(CodeInvalidField, "type", "type must be one of amqp, nats, redis, mqtt; got %q", s.Type)
	}
	if s.Connection == "" {
		return FieldErrorf(CodeMissingField, "connection", "connection is required: the name of a connection of type %s", s.Type)
	}
	if !ValidConnectionName(s.Connection) {
		return FieldErrorf(CodeInvalidField, "connection", "connection %q is not a valid connection name", s.Connection)
	}
	fields := map[string]string{"queue": s.Queue, "stream": s.Stream, "durable": s.Durable,
		"subject": s.Subject, "group": s.Group, "topic": s.Topic}
	allowed := map[DestinationType][]string{
		DestinationAMQP:  {"queue"},
		DestinationNATS:  {"stream", "durable", "subject"},
		DestinationRedis: {"stream", "group"},
		DestinationMQTT:  {"topic"},
	}[s.Type]
	for _, f := range []string{"queue", "stream", "durable", "subject", "group", "topic"} {
		if fields[f] != "" && !strings.Contains(" "+strings.Join(allowed, " ")+" ", " "+f+" ") {
			return FieldErrorf(CodeInvalidField, f, "%s does not apply to a source of type %s (its fields: %s)",
				f, s.Type, strings.Join(allowed, ", "))
		}
	}
	check := func(field, v string, fn func(string) error) error {
		if err := fn(v); err != nil {
			return FieldErrorf(CodeInvalidField, field, "%s %s", field, err)
		}
		return nil
	}
	required := func(field, v string) error {
		if v == "" {
			return FieldErrorf(CodeMissingField, field, "%s is required for a source of type %s", field, s.Type)
		}
		return nil
	}
	var err error
	switch s.Type {
	case DestinationAMQP:
		if err = required("queue", s.Queue); err == nil {
			err = check("queue", s.Queue, CheckRedisStream) // a queue name: non-empty, bounded, printable
		}
	case DestinationNATS:
		if err = required("stream", s.Stream); err == nil {
			err = check("stream", s.Stream, checkNATSName)
		}
		if err == nil && s.Durable != "" {
			err = check("durable", s.Durable, checkNATSName)
		}
		if err == nil && s.Subject != "" {
			err = check("subject", s.Subject, CheckNATSSubjectFilter)
		}
	case DestinationRedis:
		if err = required("stream", s.Stream); err == nil {
			err = check("stream", s.Stream, CheckRedisStream)
		}
		if err == nil && s.Group != "" {
			err = check("group", s.Group, CheckRedisStream)
		}
	case DestinationMQTT:
		if err = required("topic", s.Topic); err == nil {
			err = check("topic", s.Topic, CheckMQTTTopicFilter)
		}
	}
	if err != nil {
		return err
	}
	if s.Prefetch < 0 || s.Prefetch > MaxSourcePrefetch {
		return FieldErrorf(CodeInvalidField, "prefetch", "prefetch must be 0 (default %d) to %d, got %d",
			DefaultSourcePrefetch, MaxSourcePrefetch, s.Prefetch)
	}
	if s.Tenant != "" && !ValidTenant(s.Tenant) {
		return FieldErrorf(CodeInvalidField, "tenant", "tenant must be 1 to %d characters of A-Z, a-z, 0-9, '.', '_' and '-'", MaxTenantLen)
	}
	return nil
}

// checkNATSName checks a stream or consumer name: no whitespace, '.', '*',
// '>', path separators or control characters, at most 255 bytes
// (nats-server's rules for names).
func checkNATSName(s string) error {
	if len(s) > 255 {
		return fmt.Errorf("must be at most 255 bytes, got %d", len(s))
	}
	if strings.ContainsAny(s, " \t.*>/\\") {
		return errors.New("must not contain whitespace, '.', '*', '>', '/' or '\\'")
	}
	return printable(s)
}

// CheckNATSSubjectFilter checks a subject a consumer filters on:
// dot-separated non-empty tokens without whitespace; '*' may stand for a
// whole token, '>' for the last one.
func CheckNATSSubjectFilter(s string) error {
	if s == "" {
		return errors.New("must not be empty")
	}
	if len(s) > MaxBrokerNameBytes {
		return fmt.Errorf("must be at most %d bytes, got %d", MaxBrokerNameBytes, len(s))
	}
	if err := printable(s); err != nil {
		return err
	}
	toks := strings.Split(s, ".")
	for i, tok := range toks {
		switch {
		case tok == "":
			return errors.New("must be dot-separated non-empty tokens (no leading, trailing or double dots)")
		case strings.ContainsAny(tok, " \t"):
			return errors.New("must not contain whitespace")
		case tok == ">" && i != len(toks)-1:
			return errors.New("may use '>' only as the last token")
		case tok != "*" && tok != ">" && strings.ContainsAny(tok, "*>"):
			return errors.New("may use '*' and '>' only as whole tokens")
		}
	}
	return nil
}

// CheckMQTTTopicFilter checks a topic filter to subscribe to (MQTT 5,
// 4.7.1): '+' only as a whole level, '#' only as the whole last level, not
// a shared subscription (herald adds $share/herald/ itself), no control
// characters.
func CheckMQTTTopicFilter(s string) error {
	if s == "" {
		return errors.New("must not be empty")
	}
	if len(s) > MaxBrokerNameBytes {
		return fmt.Errorf("must be at most %d bytes, got %d", MaxBrokerNameBytes, len(s))
	}
	if strings.HasPrefix(s, "$share/") {
		return errors.New("must not be a shared subscription: herald subscribes as $share/herald/<topic> itself")
	}
	levels := strings.Split(s, "/")
	for i, l := range levels {
		switch {
		case l == "#" && i != len(levels)-1:
			return errors.New("may use '#' only as the last level")
		case l != "+" && l != "#" && strings.ContainsAny(l, "+#"):
			return errors.New("may use '+' and '#' only as whole levels")
		}
	}
	return printable(s)
}
