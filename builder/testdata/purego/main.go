// Command purego is a pure-Go program for the builder's tests: built with
// CGO_ENABLED=0 it is static, so its image needs no loader.
package main

import "fmt"

func main() { fmt.Println("purego") }
