//go:build !unix

package postgres_test

// selfCPU is 0 where there is no getrusage.
func selfCPU() float64 { return 0 }
