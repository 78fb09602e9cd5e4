module example.com/fluxgo-examples

go 1.26.0

require github.com/fluxgo/fluxgo v0.0.0

require (
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	golang.org/x/sys v0.50.0 // indirect
)

replace github.com/fluxgo/fluxgo => ../
