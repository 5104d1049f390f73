//go:build !windows

// Package terminal runs commands for the bridge's terminal routes: sync
// and async, in the visible terminal a person can watch with `tether
// attach`, or as hidden processes.
//
// Completion is never inferred from output. A hidden command is done
// when its process exits; a visible one when the shell's prompt hook
// prints a marker carrying the command's nonce and exit status. A silent
// command (true, mkdir -p x, gcc -o a a.c) therefore returns as soon as
// it exits.
//
// Every command runs in its own process group: hidden commands lead a new
// session, visible ones are jobs of the shell. A timeout, a cancelled
// ctx or Close kills the group (SIGTERM, then SIGKILL after
// Config.KillGrace; ^C first in the visible terminal) and the call
// answers with the output so far and timed_out. What a hidden command
// leaves running when it exits is killed too; the visible shell's
// background jobs live with the shell, as in a person's terminal.
//
// Nothing a command started outlives the Manager's process either when
// that process is killed without Close (SIGKILL, a crash): each Manager
// starts a reaper, this executable re-executed (see ReaperMain and
// Config.Reaper), which learns every command's session over a pipe and
// ends what is left in them when the pipe closes.
//
// The visible terminal is one interactive bash on a PTY, started with
// the first command that uses it. cd and export carry over between
// calls. It runs one agent command at a time: a call arriving while it
// is busy runs hidden, in the shell's current directory, and its result
// says so. A command that wedges the shell is interrupted at its timeout
// and, failing that, the shell is restarted.
//
// Bad input is reported as a *protocol.Error (invalid_payload,
// session_not_found, session_ended, overloaded) so the bridge can send
// the code to the caller unchanged.
//
// A Manager is safe for concurrent use. Close must be called; it kills
// every process and waits for every goroutine the Manager started.
package terminal
