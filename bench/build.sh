# Sourced by the scripts in bench/: build_baton DIR puts baton and
# baton-guard from this tree into DIR, and sets build to say how.
#
# BUILD=release (the default) builds them as the release does
# (go run ./tools/release -bin): baton static without cgo, the guard in C
# linked statically. That is what the .deb and the release's binaries
# install, so it is what the figures are for.
# BUILD=go builds them as the README's first command and `go install`
# do: cgo on where there is a C compiler, so both are linked dynamically
# (baton against the C library for its resolver and user lookups, which
# costs each start the dynamic loader's work and cgo's).
build_baton() {
  case "${BUILD:-release}" in
  release)
    go run ./tools/release -bin "$1" >&2
    build="built as the release is: baton static without cgo, baton-guard in C, static"
    ;;
  go)
    go build -o "$1/" ./cmd/baton ./cmd/baton-guard
    build="go build: cgo on, linked dynamically"
    ;;
  *)
    echo "BUILD=$BUILD: want release (the default) or go" >&2
    exit 64
    ;;
  esac
}

# build_like OUT PKG builds one more main package (bench/runfloor) the way
# build_baton built baton: for release, without cgo and with the release's
# -trimpath and -ldflags -s -w.
build_like() {
  case "${BUILD:-release}" in
  release) CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$1" "$2" ;;
  *) go build -o "$1" "$2" ;;
  esac
}
