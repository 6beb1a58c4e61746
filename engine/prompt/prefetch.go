package prompt

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

var pageSize = uintptr(os.Getpagesize())

// prefetch asks the kernel to start reading the rows of ids from the mapped
// file, all at once, before addRow touches them. On a cold page cache each
// row of the text embedding is a separate disk read (the rows of one
// sentence lie far apart in a 600 MB table); faulting them one by one waits
// for each read in turn, while the advice lets them run together. The
// advice covers only the rows asked for, a page or two each, never the
// table. It is only advice: errors (for example a table that is not a file
// mapping) are ignored, and a warm cache makes it a cheap no-op.
func (t table) prefetch(ids []int) {
	rowBytes := t.cols * t.dtype.Size()
	for _, id := range ids {
		row := t.data[id*rowBytes : (id+1)*rowBytes]
		if len(row) == 0 {
			continue
		}
		// madvise wants a page-aligned start; the page holding the row's
		// first byte is inside the same mapping.
		lead := int(uintptr(unsafe.Pointer(&row[0])) & (pageSize - 1))
		span := unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(&row[0]), -lead)), lead+len(row))
		_ = unix.Madvise(span, unix.MADV_WILLNEED)
	}
}
