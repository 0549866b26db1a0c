package server

import "net"

// listenLoopback listens on a random 127.0.0.1 port.
func listenLoopback() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }
