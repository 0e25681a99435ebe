package main

import (
	"context"
	"io"
	"os/exec"
	"time"
)

// childGrace is how long a bench's child process may take to end once
// told to (its stdin closed, or SIGTERM) before it is killed.
const childGrace = 30 * time.Second

// pipeChild is one of this binary's bench subcommands run as a child
// (`bench push-client`, `bench relay`) that reads its stdin until it
// closes and then ends: a parent that dies takes the child with it.
type pipeChild struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out io.ReadCloser
}

// startPipeChild starts exe with args, its stderr to stderr and its stdin
// and stdout as pipes.
func startPipeChild(ctx context.Context, exe string, stderr io.Writer, args ...string) (*pipeChild, error) {
	cmd := exec.CommandContext(ctx, exe, args...) //nolint:gosec // G204: runs herald's own binary
	cmd.Stderr = stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &pipeChild{cmd: cmd, in: in, out: out}, nil
}

// stop closes the child's stdin, which ends it, and waits (waitOrKill).
func (c *pipeChild) stop() {
	_ = c.in.Close()
	waitOrKill(c.cmd)
}

// waitOrKill waits for cmd, told to end, for childGrace, then kills it.
func waitOrKill(cmd *exec.Cmd) {
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(childGrace):
		_ = cmd.Process.Kill()
		<-done
	}
}
