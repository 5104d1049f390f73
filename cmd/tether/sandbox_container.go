//go:build !windows

package main

import (
	"flag"
	"time"

	"github.com/tetherdev/tether/bridge"
	"github.com/tetherdev/tether/sandbox/container"
)

// containerFlags are the flags of the sandbox's container runtime, shared
// by tether bridge and tether up.
type containerFlags struct {
	host, image string
	allowHost   bool
	idle        time.Duration
}

func (c *containerFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.host, "container-host", "", "container engine (Docker Engine API: dockerd or podman system service) of the sandbox's container runtime, unix:///path (default $DOCKER_HOST, else "+container.DefaultHost+")")
	fs.StringVar(&c.image, "container-image", "", "image of a container sandbox workspace that names none; it must be on the engine: nothing is pulled")
	fs.BoolVar(&c.allowHost, "container-allow-host-network", false, "let container sandbox workspaces ask for network \"host\" (default: refused; they get no network)")
	fs.DurationVar(&c.idle, "container-idle", container.DefaultIdle, "stop a sandbox workspace's container after this long without commands (the next command starts it again)")
}

func (c *containerFlags) config() bridge.SandboxContainerConfig {
	return bridge.SandboxContainerConfig{Host: c.host, Image: c.image, AllowHostNetwork: c.allowHost, Idle: c.idle}
}
