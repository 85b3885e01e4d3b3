package vfs_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/weirhq/weir/vfs"
)

// FuzzMemFSvsOS applies one random sequence of operations to a MemFS and to
// the OS (in a temporary directory) and requires the same results: values,
// contents and error numbers. The seeds run as a normal test.
func FuzzMemFSvsOS(f *testing.F) {
	f.Add([]byte{0, 0, 2, 0, 5, 14, 0, 7, 0, 1, 5, 1})
	f.Add([]byte{10, 4, 0, 5, 3, 0, 9, 4, 5, 0, 7, 3, 4, 11, 2, 9, 2})
	f.Add([]byte{10, 7, 1, 6, 1, 3, 1, 20, 4, 4, 1, 7, 15, 1, 6, 15, 1, 6, 4, 1, 2, 5, 1})
	f.Add([]byte{10, 2, 7, 2, 6, 7, 6, 2, 8, 2, 9, 2, 12, 2, 13, 0, 0, 2, 0, 3, 1, 2})
	f.Add([]byte{0, 1, 1, 1, 13, 1, 2, 1, 6, 15, 1, 4, 16, 0, 12, 0, 8, 1, 11, 0, 6, 1, 2, 0})
	f.Fuzz(func(t *testing.T, prog []byte) {
		if len(prog) > 256 {
			prog = prog[:256]
		}
		d := newDiffer(t)
		for pc := 0; pc < len(prog); {
			pc = d.step(prog, pc)
		}
		d.compareTrees("")
	})
}

var diffNames = []string{"a", "b", "d", "d/a", "d/b", "d/e", "d/e/a", "e"}

type differ struct {
	t        *testing.T
	mem      vfs.FS
	osRoot   string
	memFiles [4]vfs.File
	osFiles  [4]vfs.File
	log      []string
}

func newDiffer(t *testing.T) *differ {
	d := &differ{t: t, mem: vfs.NewCrashableMem(), osRoot: t.TempDir()}
	t.Cleanup(func() {
		for i := range d.osFiles {
			if d.osFiles[i] != nil {
				d.osFiles[i].Close()
			}
		}
	})
	return d
}

// class names an outcome for comparison.
func class(err error) string {
	var errno syscall.Errno
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, os.ErrClosed):
		return "closed"
	case err == io.EOF:
		return "EOF"
	case errors.As(err, &errno):
		return errno.Error()
	}
	return "other: " + err.Error()
}

func (d *differ) check(what string, mv, ov any, merr, oerr error) {
	d.log = append(d.log, fmt.Sprintf("%s -> %v %s", what, mv, class(merr)))
	if class(merr) != class(oerr) || fmt.Sprint(mv) != fmt.Sprint(ov) {
		d.t.Fatalf("%s: mem (%v, %v), os (%v, %v)\nprogram:\n%s", what, mv, merr, ov, oerr,
			fmt.Sprint(d.log))
	}
}

// step decodes and runs one operation at prog[pc:], returning the next pc.
func (d *differ) step(prog []byte, pc int) int {
	arg := func() int {
		if pc >= len(prog) {
			return 0
		}
		pc++
		return int(prog[pc-1])
	}
	op := arg() % 17
	name := diffNames[arg()%len(diffNames)]
	slot := arg() % len(d.memFiles)
	osName := filepath.Join(d.osRoot, name)
	mf, of := d.memFiles[slot], d.osFiles[slot]
	open := func(what string, mo func(string) (vfs.File, error)) {
		if mf != nil {
			mf.Close()
			of.Close()
		}
		m, merr := mo(name)
		var o vfs.File
		var oerr error
		switch what {
		case "create":
			o, oerr = vfs.Default.Create(osName)
		case "openrw":
			o, oerr = vfs.Default.OpenReadWrite(osName)
		case "open":
			o, oerr = vfs.Default.Open(osName)
		}
		d.check(what+" "+name, nil, nil, merr, oerr)
		d.memFiles[slot], d.osFiles[slot] = m, o
	}
	switch op {
	case 0:
		open("create", d.mem.Create)
	case 1:
		open("openrw", d.mem.OpenReadWrite)
	case 2:
		open("open", d.mem.Open)
	case 3: // write
		if mf != nil {
			p := bytes.Repeat([]byte{byte('a' + pc%26)}, arg()%9)
			mn, merr := mf.Write(p)
			on, oerr := of.Write(p)
			d.check(fmt.Sprintf("write %d %d", slot, len(p)), mn, on, merr, oerr)
		}
	case 4: // writeAt
		if mf != nil {
			p := bytes.Repeat([]byte{byte('A' + pc%26)}, arg()%9)
			off := int64(arg() % 24)
			mn, merr := mf.WriteAt(p, off)
			on, oerr := of.WriteAt(p, off)
			d.check(fmt.Sprintf("writeat %d %d@%d", slot, len(p), off), mn, on, merr, oerr)
		}
	case 5: // truncate
		if mf != nil {
			size := int64(arg() % 24)
			d.check(fmt.Sprintf("truncate %d %d", slot, size), nil, nil, mf.Truncate(size), of.Truncate(size))
		}
	case 6: // readAt
		if mf != nil {
			off := int64(arg() % 24)
			mb, ob := make([]byte, arg()%16), make([]byte, 0)
			ob = append(ob, mb...)
			mn, merr := mf.ReadAt(mb, off)
			on, oerr := of.ReadAt(ob, off)
			d.check(fmt.Sprintf("readat %d %d@%d", slot, len(mb), off), string(mb[:mn]), string(ob[:on]), merr, oerr)
		}
	case 7: // read
		if mf != nil {
			mb := make([]byte, arg()%16)
			ob := make([]byte, len(mb))
			mn, merr := mf.Read(mb)
			on, oerr := of.Read(ob)
			d.check(fmt.Sprintf("read %d %d", slot, len(mb)), string(mb[:mn]), string(ob[:on]), merr, oerr)
		}
	case 8: // seek
		if mf != nil {
			fi, err := of.Stat()
			if err == nil && fi.IsDir() {
				break // directory offsets are file-system specific
			}
			off, whence := int64(arg()%24)-4, arg()%3
			mo, merr := mf.Seek(off, whence)
			oo, oerr := of.Seek(off, whence)
			d.check(fmt.Sprintf("seek %d %d %d", slot, off, whence), mo, oo, merr, oerr)
		}
	case 9: // sync
		if mf != nil {
			d.check(fmt.Sprintf("sync %d", slot), nil, nil, mf.Sync(), of.Sync())
		}
	case 10:
		d.check("mkdirall "+name, nil, nil, d.mem.MkdirAll(name, 0o755), vfs.Default.MkdirAll(osName, 0o755))
	case 11:
		to := diffNames[arg()%len(diffNames)]
		d.check("rename "+name+" "+to, nil, nil, d.mem.Rename(name, to),
			vfs.Default.Rename(osName, filepath.Join(d.osRoot, to)))
	case 12:
		d.check("remove "+name, nil, nil, d.mem.Remove(name), vfs.Default.Remove(osName))
	case 13:
		d.check("removeall "+name, nil, nil, d.mem.RemoveAll(name), vfs.Default.RemoveAll(osName))
	case 14:
		ml, merr := d.mem.List(name)
		ol, oerr := vfs.Default.List(osName)
		d.check("list "+name, ml, ol, merr, oerr)
	case 15:
		mi, merr := d.mem.Stat(name)
		oi, oerr := vfs.Default.Stat(osName)
		d.check("stat "+name, statString(mi), statString(oi), merr, oerr)
	case 16:
		if mf != nil {
			d.check(fmt.Sprintf("close %d", slot), nil, nil, mf.Close(), of.Close())
		}
	}
	return pc
}

func statString(fi os.FileInfo) string {
	switch {
	case fi == nil:
		return ""
	case fi.IsDir():
		return fi.Name() + " dir" // directory sizes are file-system specific
	}
	return fmt.Sprintf("%s %d", fi.Name(), fi.Size())
}

// compareTrees requires the same names and file contents under dir.
func (d *differ) compareTrees(dir string) {
	ml, merr := d.mem.List(dir)
	ol, oerr := vfs.Default.List(filepath.Join(d.osRoot, dir))
	d.check("final list "+dir, ml, ol, merr, oerr)
	for _, n := range ml {
		name := filepath.Join(dir, n)
		fi, err := d.mem.Stat(name)
		if err != nil {
			d.t.Fatal(err)
		}
		if fi.IsDir() {
			d.compareTrees(name)
			continue
		}
		read := func(fs vfs.FS, name string) (string, error) {
			f, err := fs.Open(name)
			if err != nil {
				return "", err
			}
			defer f.Close()
			b, err := io.ReadAll(f)
			return string(b), err
		}
		mc, merr := read(d.mem, name)
		oc, oerr := read(vfs.Default, filepath.Join(d.osRoot, name))
		d.check("final content "+name, mc, oc, merr, oerr)
	}
}
