package runtimex

import (
	"testing"
	"testing/fstest"
)

func TestMemoryLimitIsTheContainersOrNone(t *testing.T) {
	for _, c := range []struct {
		name  string
		files fstest.MapFS
		want  int64
		ok    bool
	}{
		{"cgroup v2, 1 GiB", fstest.MapFS{"sys/fs/cgroup/memory.max": {Data: []byte("1073741824\n")}}, 1 << 30, true},
		{"cgroup v2, unlimited", fstest.MapFS{"sys/fs/cgroup/memory.max": {Data: []byte("max\n")}}, 0, false},
		{"cgroup v1, 256 MiB", fstest.MapFS{"sys/fs/cgroup/memory/memory.limit_in_bytes": {Data: []byte("268435456\n")}}, 256 << 20, true},
		{"cgroup v1, unlimited", fstest.MapFS{"sys/fs/cgroup/memory/memory.limit_in_bytes": {Data: []byte("9223372036854771712\n")}}, 0, false},
		{"no cgroup", fstest.MapFS{}, 0, false},
	} {
		got, ok := MemoryLimit(c.files)
		if got != c.want || ok != c.ok {
			t.Errorf("%s: %d, %v; want %d, %v", c.name, got, ok, c.want, c.ok)
		}
	}
}
