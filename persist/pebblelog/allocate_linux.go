package pebblelog

import "syscall"

// allocate gives the file at fd size bytes of disk at once.
func allocate(fd uintptr, size int64) error {
	return syscall.Fallocate(int(fd), 0, 0, size)
}
