// Package wire holds the contracts two modules share beyond a protocol's
// JSON payload: the Go values one module hands another in-process, as a
// message's Attached companion, when both run in one broker. Both sides
// import this package, never each other (a module imports no other
// module). A client over a socket gets the same content as the JSON
// payload its protocol documents (docs/MODULES.md).
package wire
