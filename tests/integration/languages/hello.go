// The seed article's Go "Hello, Unit!", with the standard library in place of Unit's
// unit.nginx.org/go: it serves on the socket corral hands over (descriptor 3, LISTEN_FDS).
package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
)

func main() {
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, "Hello, Unit!\n")
	})
	listener, err := net.FileListener(os.NewFile(3, "LISTEN_FDS"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	http.Serve(listener, nil)
}
