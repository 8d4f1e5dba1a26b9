"""The dev stack of `wow-temporal dev` and `wow-temporal demo`.

`server` runs the embedded Temporal dev server; `services` are what runs beside it (domain host,
workers, control API); `stack` is the `dev` command's engine (start all, wait, stop all); `demo`
walks the spec's e-shop on a running stack. `ports`, `binaries` and `errors` are what they share.
Nothing is imported here, so a command that only checks a port stays light.
"""
