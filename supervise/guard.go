package supervise

// GuardCommand is the hidden subcommand under which baton re-executes itself
// as the guard of a command's process tree.
const GuardCommand = "__guard"

// GuardMain is the guard's main; it returns the guard's exit status.
func GuardMain(args []string) int {
	return 70
}
