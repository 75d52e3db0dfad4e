package flock

// SetFenceStep makes f run at each step of a fence file's update, so that a
// test can crash the update there; it returns the restore function.
func SetFenceStep(f func(step string)) func() {
	old := fenceStep
	fenceStep = f
	return func() { fenceStep = old }
}
