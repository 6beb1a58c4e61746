//go:build !amd64

package codec

func setAVX(bool) {}
