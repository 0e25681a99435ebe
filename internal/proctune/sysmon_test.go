package proctune_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/proctune"
)

func TestSysmonEnv(t *testing.T) {
	const st = "GODEBUG=" + proctune.SysmonGODEBUG
	for _, tt := range []struct {
		name string
		env  []string
		want []string
		ok   bool
	}{
		{"no GODEBUG", []string{"HOME=/root"}, []string{"HOME=/root", st}, true},
		{"empty environment", nil, []string{st}, true},
		{"empty GODEBUG", []string{"GODEBUG=", "A=1"}, []string{st, "A=1"}, true},
		{"other settings kept", []string{"GODEBUG=gctrace=1,madvdontneed=1"}, []string{"GODEBUG=gctrace=1,madvdontneed=1," + proctune.SysmonGODEBUG}, true},
		{"operator's schedtrace wins", []string{"GODEBUG=schedtrace=1000"}, []string{"GODEBUG=schedtrace=1000"}, false},
		{"already set by the exec", []string{"A=1", "GODEBUG=gctrace=1," + proctune.SysmonGODEBUG}, []string{"A=1", "GODEBUG=gctrace=1," + proctune.SysmonGODEBUG}, false},
		{"a look-alike name is not GODEBUG", []string{"XGODEBUG=schedtrace=1"}, []string{"XGODEBUG=schedtrace=1", st}, true},
		{"a look-alike setting is not schedtrace", []string{"GODEBUG=xschedtrace=1"}, []string{"GODEBUG=xschedtrace=1," + proctune.SysmonGODEBUG}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := append([]string(nil), tt.env...)
			got, ok := proctune.SysmonEnv(in)
			require.Equal(t, tt.ok, ok)
			require.Equal(t, tt.want, got)
			require.Equal(t, tt.env, in, "the caller's slice is not changed")
		})
	}
}
