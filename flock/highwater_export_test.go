package flock

// SetFenceStep makes f run at each step of a fence file's update, so that a
// test can crash the update there; it returns the restore function.
func SetFenceStep(f func(step string)) func() {
	old := fenceStep
	fenceStep = f
	return func() { fenceStep = old }
}

// SetOnScan makes f see the inode of each lock whose holder's descriptors
// Acquire reads while it looks for a lock on a removed lock file; it
// returns the restore function.
func SetOnScan(f func(ino uint64)) func() {
	old := onScan
	onScan = f
	return func() { onScan = old }
}

// SetOnFdDir makes f see each process whose descriptors Acquire reads
// while it looks for a lock on a removed lock file; it returns the restore
// function.
func SetOnFdDir(f func(pid int)) func() {
	old := onFdDir
	onFdDir = f
	return func() { onFdDir = old }
}
