//go:build !windows

// Package podmantest runs a podman engine of its own for tests: `podman
// system service` on a socket in a temporary directory, with its own
// storage (--root, --runroot, --tmpdir there too, so a test leaves nothing
// in the machine's podman) and containers.conf (runc, cgroupfs, the
// ulimits these machines allow), and an image imported from a root
// filesystem of Debian's busybox-static: nothing is pulled.
package podmantest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tetherdev/tether/internal/testproc"
)

// Image is the name of the image Start imports.
const Image = "localhost/tether-sandbox-test:busybox"

// containersConf is what podman runs containers with here: runc (crun
// fails on these machines' hybrid cgroups), cgroupfs (there may be no
// systemd), file events (journald may not run) and the ulimits runc may
// set (deploy/podman/containers.conf says why).
const containersConf = `[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"

[containers]
default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]
`

// busyboxApplets are the commands the image has, links to busybox.
var busyboxApplets = []string{"sh", "sleep", "true", "false", "cat", "echo", "kill", "ls", "id", "touch",
	"head", "tail", "dd", "wc", "env", "sed", "grep", "tr", "ps", "nc", "stat", "mkdir", "rm", "yes", "seq"}

// Engine is a running podman service.
type Engine struct {
	// Host is its address for the Docker Engine API client.
	Host string
	// Image is the busybox image's name.
	Image string

	dir     string
	service *testproc.Proc // nil until the service started
}

// Available reports why podman cannot run here, or nil.
func Available() error {
	if _, err := exec.LookPath("podman"); err != nil {
		return fmt.Errorf("podman is not installed (make deps installs it): %w", err)
	}
	if _, err := os.Stat("/bin/busybox"); err != nil {
		return fmt.Errorf("busybox-static is not installed (make deps installs it): %w", err)
	}
	return nil
}

// Start runs a podman service with its storage in a new temporary
// directory of its own (under the system's, whose short path the socket's
// must fit) and imports Image. Close stops it and removes the directory.
func Start() (*Engine, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "tether-podman-")
	if err != nil {
		return nil, err
	}
	e := &Engine{dir: dir, Image: Image}
	if err := e.start(); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

func (e *Engine) start() error {
	if err := os.WriteFile(filepath.Join(e.dir, "containers.conf"), []byte(containersConf), 0o600); err != nil {
		return err
	}
	sock := filepath.Join(e.dir, "podman.sock")
	e.Host = "unix://" + sock
	if err := e.importImage(); err != nil {
		return err
	}
	cmd := exec.Command("podman", append(e.globalArgs(), "system", "service", "--time=0", e.Host)...)
	cmd.Env = e.env()
	// conmon, started by the service, writes a file "oom" into its
	// working directory when a container's cgroup kills for memory: the
	// engine's directory, not the test's package.
	cmd.Dir = e.dir
	// A child of testproc: its own process group (Close ends conmon and
	// whatever it started too), killed should the test binary die.
	service, err := testproc.Start("podman system service", cmd, filepath.Join(e.dir, "service.log"))
	if err != nil {
		return err
	}
	e.service = service
	deadline := time.Now().Add(30 * time.Second)
	for {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			return nil
		}
		select {
		case <-service.Done():
			return fmt.Errorf("podman system service exited: %s", service.LogTail(4096))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return errors.New("podman system service did not listen within 30s")
		}
	}
}

// Dir is the engine's directory (its storage, its socket); Close removes
// it.
func (e *Engine) Dir() string { return e.dir }

func (e *Engine) globalArgs() []string {
	return []string{"--root", filepath.Join(e.dir, "root"), "--runroot", filepath.Join(e.dir, "run"),
		"--tmpdir", filepath.Join(e.dir, "tmp"), "--cgroup-manager", "cgroupfs", "--runtime", "runc", "--events-backend", "file"}
}

func (e *Engine) env() []string {
	return append(os.Environ(), "CONTAINERS_CONF="+filepath.Join(e.dir, "containers.conf"))
}

// Podman runs the podman CLI on this engine's storage (podman kill,
// podman exec, …) and returns its output.
func (e *Engine) Podman(ctx context.Context, args ...string) (string, error) {
	out, err := e.PodmanCmd(ctx, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("podman %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// PodmanCmd is the command line Podman runs, for a benchmark to time.
func (e *Engine) PodmanCmd(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "podman", append(e.globalArgs(), args...)...)
	cmd.Env = e.env()
	return cmd
}

// importImage builds the busybox root filesystem and imports it.
func (e *Engine) importImage() error {
	rootfs := filepath.Join(e.dir, "rootfs")
	for _, d := range []string{"bin", "tmp", "workspace", "proc", "sys", "dev", "etc"} {
		if err := os.MkdirAll(filepath.Join(rootfs, d), 0o755); err != nil {
			return err
		}
	}
	if err := os.Chmod(filepath.Join(rootfs, "tmp"), 0o1777); err != nil {
		return err
	}
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(rootfs, "bin", "busybox"), bb, 0o755); err != nil {
		return err
	}
	for _, a := range busyboxApplets {
		if err := os.Symlink("busybox", filepath.Join(rootfs, "bin", a)); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(rootfs, "etc", "passwd"), []byte("root:x:0:0:root:/root:/bin/sh\n"), 0o644); err != nil {
		return err
	}
	tarball := filepath.Join(e.dir, "rootfs.tar")
	if out, err := exec.Command("tar", "-C", rootfs, "-cf", tarball, ".").CombinedOutput(); err != nil {
		return fmt.Errorf("tar: %w: %s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err = e.Podman(ctx, "import", "--change", "ENV PATH=/bin", tarball, e.Image)
	return err
}

// KillService kills the API service (not the containers, which conmon
// keeps), as an engine that dies mid-command would; Close still cleans up.
func (e *Engine) KillService() { e.service.Kill() }

// PauseService stops the API service (SIGSTOP), as an engine that hangs
// would: its connections stay open and nothing answers on them.
// ResumeService lets it go on.
func (e *Engine) PauseService() { _ = syscall.Kill(e.service.Pid(), syscall.SIGSTOP) }

// ResumeService undoes PauseService.
func (e *Engine) ResumeService() { _ = syscall.Kill(e.service.Pid(), syscall.SIGCONT) }

// Processes are the processes running from this engine's directory (a
// conmon, the service): after Close, none.
func (e *Engine) Processes() []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, d := range entries {
		pid, err := strconv.Atoi(d.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err == nil && bytes.Contains(cmdline, []byte(e.dir)) {
			out = append(out, pid)
		}
	}
	return out
}

// Containers lists the names of the engine's containers, running or not.
func (e *Engine) Containers(ctx context.Context) ([]string, error) {
	out, err := e.Podman(ctx, "ps", "-a", "--format", "{{.Names}}")
	if err != nil {
		return nil, err
	}
	return strings.Fields(out), nil
}

// Close stops the service and everything it started (its process group:
// conmon and the containers' processes), removes what podman keeps in
// its storage (its overlay mounts first), and waits.
func (e *Engine) Close() {
	if e.service != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		_, _ = e.Podman(ctx, "rm", "-a", "-f", "-t", "0")
		cancel()
		// Its report (a service killed before, conmons left in its group)
		// is no failure here: what is left is ended below either way.
		_ = e.service.Stop(10 * time.Second)
	}
	// conmon outlives a service killed under an attached exec: whatever
	// still runs from this engine's storage is ended.
	for _, pid := range e.Processes() {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// podman's storage holds overlay mounts and files owned by subuids:
	// its own reset unmounts and removes them.
	_, _ = e.Podman(ctx, "system", "reset", "--force")
	_ = exec.Command("umount", "-R", filepath.Join(e.dir, "root", "overlay")).Run()
	_ = os.RemoveAll(e.dir)
}
