package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/batonhq/baton"
)

const completionHelp = `
Usage: baton completion bash|zsh|fish

Prints the completion script of a shell for baton's commands and their
flags, made from the same command table, flag sets and usage lines that
print --help, so that it knows every flag that this baton has. It
completes commands, their subcommands (doctor pg, outbox enqueue, …),
flags, the values of flags that take one of a fixed set (--log-level
debug|info|warn|error, --scope host|user, …), and job names where a
command takes a JOB: it asks 'baton jobs --names' (at most 3 s) with the
store flags already on the line, else $BATON_DB or the local store. The .deb installs them;
the examples install one by hand (or, for bash, put
'source <(baton completion bash)' in ~/.bashrc).

Examples:
  # bash, for every user of the host (as root)
  baton completion bash > /etc/bash_completion.d/baton

  # zsh, into the first directory of $fpath
  baton completion zsh > "${fpath[1]}/_baton"

  # fish, for this user
  baton completion fish > ~/.config/fish/completions/baton.fish
`

// CompletionCommand prints a shell's completion script.
type CompletionCommand struct{ env *Env }

// Run prints the script.
func (c *CompletionCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("completion", c.env.Stdout, completionHelp)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return baton.Invalid("SHELL", "want baton completion bash, zsh or fish")
	}
	write, ok := map[string]func(io.Writer, []commandHelp) error{
		"bash": bashCompletion, "zsh": zshCompletion, "fish": fishCompletion,
	}[pos[0]]
	if !ok {
		return baton.Invalid("SHELL", "%q: want bash, zsh or fish", pos[0])
	}
	cmds, err := helpFor()
	if err != nil {
		return err
	}
	return write(c.env.Stdout, cmds)
}

// firstLine is a flag's usage up to its first line break, for the short
// descriptions that zsh and fish show beside a flag.
func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return strings.TrimSpace(strings.ReplaceAll(s, "`", ""))
}

func commandNames(cmds []commandHelp) []string {
	names := make([]string, len(cmds))
	for i, c := range cmds {
		names[i] = c.name
	}
	return names
}

// flagChoices are the values of the flags that take one of a fixed set,
// by flag name, or by "command flag" where a command's flag of that name
// takes others (import's --scope is a job's, run's a lock directory's).
// The completions offer them after the flag; TestFlagChoicesMatchUsage
// checks that each flag's usage names every value listed here.
var flagChoices = map[string][]string{
	"dst-gap":                      {baton.GapShift, baton.GapSkip},
	"dst-repeat":                   {baton.RepeatOnce, baton.RepeatBoth},
	"idempotency-key-format":       {"quoted", "bare"},
	"relay-idempotency-key-format": {"quoted", "bare"},
	"log-format":                   {"text", "json", "journal", "auto"},
	"log-level":                    {"debug", "info", "warn", "error"},
	"scope":                        {"host", "user"},
	"import scope":                 {baton.ScopeFleet, baton.ScopeHost},
}

// choicesOf are the values command's flag completes to, if a fixed set.
func choicesOf(command, flag string) ([]string, bool) {
	if c, ok := flagChoices[command+" "+flag]; ok {
		return c, true
	}
	c, ok := flagChoices[flag]
	return c, ok
}

// httpMethods are what baton http's METHOD completes to.
var httpMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"}

// completionArgs is what a command's arguments (its words that are not
// flags) complete to.
type completionArgs struct {
	// words are the first argument's values: subcommands (doctor pg,
	// outbox enqueue, …) or a fixed set (completion bash).
	words []string
	// jobs: the first argument names a job, offered from the store as
	// baton jobs --names lists it.
	jobs bool
}

// subcommandWord is a subcommand or a set of them in a usage line
// ("enqueue", "bash|zsh|fish"); placeholders are in capitals.
var subcommandWord = regexp.MustCompile(`^[a-z][a-z0-9-]*(\|[a-z][a-z0-9-]*)*$`)

// argsOf reads what c's arguments are from its usage lines ("Usage: baton
// outbox enqueue …", "       baton outbox status …"), so that a new
// subcommand is completed as soon as its help shows it. The subjects of
// doctor and the methods of http are placeholders there, named here.
func argsOf(c commandHelp) completionArgs {
	var a completionArgs
	for _, line := range strings.Split(c.help, "\n") {
		line = strings.TrimSpace(strings.TrimPrefix(line, "Usage:"))
		fields := strings.Fields(line)
		if len(fields) < 2 || fields[0] != "baton" {
			continue
		}
		if fields[1] == c.name && len(fields) > 2 && subcommandWord.MatchString(fields[2]) {
			for _, w := range strings.Split(fields[2], "|") {
				if !slices.Contains(a.words, w) {
					a.words = append(a.words, w)
				}
			}
		}
		// The first placeholder after the command, past its flags, is a
		// JOB (resume's usage is pause's: "baton pause [--note TEXT] JOB").
		for _, f := range fields[2:] {
			if f = strings.Trim(f, "[]"); f == "JOB" {
				a.jobs = true
			}
		}
	}
	switch c.name {
	case "doctor":
		for _, s := range doctorSubjects {
			a.words = append(a.words, s.name)
		}
	case "http":
		a.words = httpMethods
	}
	return a
}

// storeFlagNames are the flags that say which store baton jobs --names
// reads: the completions pass them on from the line being completed.
var storeFlagNames = []string{"db", "lock-dir", "scope", "schema"}

func bashCompletion(w io.Writer, cmds []commandHelp) error {
	var b strings.Builder
	b.WriteString(`# bash completion for baton: made by 'baton completion bash' from the flag
# sets and usage lines that print each command's --help.

# _baton_jobs lists the store's jobs, as baton jobs --names does, with the
# store flags of the line being completed; 3 s at most, nothing on error.
_baton_jobs() {
    local i args=()
    for ((i = 2; i < COMP_CWORD; i++)); do
        case ${COMP_WORDS[i]} in
            ` + "--" + strings.Join(storeFlagNames, "|--") + `) args+=("${COMP_WORDS[i]}" "${COMP_WORDS[i+1]}") ;;
            ` + "--" + strings.Join(storeFlagNames, "=*|--") + `=*) args+=("${COMP_WORDS[i]}") ;;
        esac
    done
    timeout 3 "${COMP_WORDS[0]}" jobs --names "${args[@]}" 2>/dev/null
}

_baton() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
    if [[ $COMP_CWORD -eq 1 ]]; then
        COMPREPLY=($(compgen -W "` + strings.Join(commandNames(cmds), " ") + ` help --help --version" -- "$cur"))
        return
    fi
    local i
    for ((i = 2; i < COMP_CWORD; i++)); do
        if [[ ${COMP_WORDS[i]} == -- ]]; then
            # The rest is the job's command.
            COMPREPLY=($(compgen -c -f -- "$cur"))
            return
        fi
    done
    local flags= valued= words= jobs=
    case ${COMP_WORDS[1]} in
    help)
        if [[ $COMP_CWORD -eq 2 ]]; then
            COMPREPLY=($(compgen -W "` + strings.Join(commandNames(cmds), " ") + `" -- "$cur"))
        fi
        return ;;
`)
	for _, c := range cmds {
		var flags, valued []string
		for _, f := range c.flags {
			flags = append(flags, "--"+f.Name)
			if takesValue(f) {
				valued = append(valued, "--"+f.Name)
			}
		}
		a := argsOf(c)
		jobs := ""
		if a.jobs {
			jobs = "1"
		}
		fmt.Fprintf(&b, "    %s)\n        flags=%q\n        valued=%q\n        words=%q jobs=%q ;;\n",
			c.name, strings.Join(flags, " "), strings.Join(valued, " "), strings.Join(a.words, " "), jobs)
	}
	b.WriteString(`    esac
    if [[ $prev == --* && " $valued " == *" $prev "* ]]; then
        case "${COMP_WORDS[1]} $prev" in
`)
	for _, c := range cmds {
		for _, f := range c.flags {
			if choices, ok := choicesOf(c.name, f.Name); ok && takesValue(f) {
				fmt.Fprintf(&b, "        %q) COMPREPLY=($(compgen -W %q -- \"$cur\")) ;;\n", c.name+" --"+f.Name, strings.Join(choices, " "))
			}
		}
	}
	b.WriteString(`        *) COMPREPLY=($(compgen -f -- "$cur")) ;;
        esac
        return
    fi
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$flags --help" -- "$cur"))
        return
    fi
    # How many arguments come before this one: a subcommand or a job is
    # the first.
    local n=0 skip=
    for ((i = 2; i < COMP_CWORD; i++)); do
        if [[ -n $skip ]]; then
            skip=
        elif [[ ${COMP_WORDS[i]} == --*=* ]]; then
            :
        elif [[ ${COMP_WORDS[i]} == -* ]]; then
            [[ " $valued " == *" ${COMP_WORDS[i]} "* ]] && skip=1
        else
            n=$((n + 1))
        fi
    done
    if [[ $n -eq 0 && -n $words ]]; then
        COMPREPLY=($(compgen -W "$words" -- "$cur"))
        return
    fi
    if [[ $n -eq 0 && -n $jobs ]]; then
        COMPREPLY=($(compgen -W "$(_baton_jobs)" -- "$cur"))
        return
    fi
    COMPREPLY=($(compgen -f -- "$cur"))
}
complete -o default -F _baton baton
`)
	_, err := io.WriteString(w, b.String())
	return err
}

// zshQuote quotes s for a single-quoted _arguments spec or _describe item,
// where brackets and colons are syntax.
func zshQuote(s string) string {
	return strings.NewReplacer(`'`, `'\''`, `\`, `\\`, `[`, `\[`, `]`, `\]`, `:`, `\:`).Replace(s)
}

func zshCompletion(w io.Writer, cmds []commandHelp) error {
	var b strings.Builder
	b.WriteString(`#compdef baton
# zsh completion for baton: made by 'baton completion zsh' from the flag sets
# and usage lines that print each command's --help.

# _baton_jobs offers the store's jobs, as baton jobs --names lists them, with
# the store flags of the line being completed; 3 s at most.
_baton_jobs() {
    local -a jobs args
    local i
    for (( i = 2; i < CURRENT; i++ )); do
        case ${words[i]} in
            ` + "--" + strings.Join(storeFlagNames, "|--") + `) args+=(${words[i]} ${words[i+1]}) ;;
            ` + "--" + strings.Join(storeFlagNames, "=*|--") + `=*) args+=(${words[i]}) ;;
        esac
    done
    jobs=(${(f)"$(timeout 3 ${words[1]} jobs --names $args 2>/dev/null)"})
    _describe -t jobs 'job' jobs
}

_baton() {
    local -a commands
    commands=(
`)
	for _, c := range cmds {
		fmt.Fprintf(&b, "        '%s:%s'\n", c.name, zshQuote(c.synopsis))
	}
	b.WriteString(`    )
    if (( CURRENT == 2 )); then
        _describe -t commands 'baton command' commands
        return
    fi
    if [[ ${words[2]} == help ]]; then
        (( CURRENT == 3 )) && _describe -t commands 'baton command' commands
        return
    fi
    local cmd=${words[2]}
    shift words
    (( CURRENT-- ))
    case $cmd in
`)
	for _, c := range cmds {
		fmt.Fprintf(&b, "    %s)\n        _arguments -S \\\n", c.name)
		for _, f := range c.flags {
			name, usage := flag.UnquoteUsage(f)
			if choices, ok := choicesOf(c.name, f.Name); ok && takesValue(f) {
				fmt.Fprintf(&b, "            '--%s=[%s]:%s:(%s)' \\\n", f.Name, zshQuote(firstLine(usage)), zshQuote(cmp.Or(name, "VALUE")), strings.Join(choices, " "))
			} else if takesValue(f) {
				fmt.Fprintf(&b, "            '--%s=[%s]:%s:_files' \\\n", f.Name, zshQuote(firstLine(usage)), zshQuote(cmp.Or(name, "VALUE")))
			} else {
				fmt.Fprintf(&b, "            '--%s[%s]' \\\n", f.Name, zshQuote(firstLine(usage)))
			}
		}
		b.WriteString("            '--help[print the help]' \\\n")
		switch a := argsOf(c); {
		case len(a.words) > 0:
			fmt.Fprintf(&b, "            '1:subcommand:(%s)' \\\n", strings.Join(a.words, " "))
		case a.jobs:
			b.WriteString("            '1:job:_baton_jobs' \\\n")
		}
		b.WriteString("            '*::argument:_files' ;;\n")
	}
	b.WriteString(`    esac
}
if [[ $funcstack[1] == _baton ]]; then
    _baton "$@"
else
    compdef _baton baton
fi
`)
	_, err := io.WriteString(w, b.String())
	return err
}

// fishQuote quotes s as a single-quoted fish string.
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

func fishCompletion(w io.Writer, cmds []commandHelp) error {
	var b strings.Builder
	var valued []string
	for _, c := range cmds {
		for _, f := range c.flags {
			if takesValue(f) && !slices.Contains(valued, "--"+f.Name) {
				valued = append(valued, "--"+f.Name)
			}
		}
	}
	slices.Sort(valued)
	b.WriteString(`# fish completion for baton: made by 'baton completion fish' from the flag
# sets and usage lines that print each command's --help.

# __baton_nargs prints how many arguments (words that are not flags or
# their values) follow the command on the line being completed.
function __baton_nargs
    set -l valued ` + strings.Join(valued, " ") + `
    set -l words (commandline -opc)
    set -l n 0
    set -l skip 0
    for w in $words[3..-1]
        if test $skip = 1
            set skip 0
        else if string match -q -- '--*=*' $w
        else if string match -q -- '-*' $w
            contains -- $w $valued; and set skip 1
        else
            set n (math $n + 1)
        end
    end
    echo $n
end

# __baton_jobs lists the store's jobs, as baton jobs --names does, with the
# store flags of the line being completed; 3 s at most.
function __baton_jobs
    set -l words (commandline -opc)
    set -l args
    for i in (seq 3 (count $words))
        switch $words[$i]
            case ` + "--" + strings.Join(storeFlagNames, " --") + `
                set -a args $words[$i] $words[(math $i + 1)]
            case ` + "--" + strings.Join(storeFlagNames, "=\\* --") + `=\*
                set -a args $words[$i]
        end
    end
    timeout 3 $words[1] jobs --names $args 2>/dev/null
end

`)
	for _, c := range cmds {
		fmt.Fprintf(&b, "complete -c baton -n __fish_use_subcommand -f -a %s -d %s\n", c.name, fishQuote(c.synopsis))
	}
	b.WriteString("complete -c baton -n __fish_use_subcommand -f -a help -d 'print a command\\'s help'\n")
	fmt.Fprintf(&b, "complete -c baton -n '__fish_seen_subcommand_from help; and test (__baton_nargs) -eq 1' -f -a %s\n", fishQuote(strings.Join(commandNames(cmds), " ")))
	for _, c := range cmds {
		cond := "__fish_seen_subcommand_from " + c.name + "; and test (__baton_nargs) -eq 0"
		switch a := argsOf(c); {
		case len(a.words) > 0:
			fmt.Fprintf(&b, "complete -c baton -n %s -f -a %s\n", fishQuote(cond), fishQuote(strings.Join(a.words, " ")))
		case a.jobs:
			fmt.Fprintf(&b, "complete -c baton -n %s -f -a '(__baton_jobs)'\n", fishQuote(cond))
		}
	}
	for _, c := range cmds {
		cond := fishQuote("__fish_seen_subcommand_from " + c.name)
		for _, f := range c.flags {
			_, usage := flag.UnquoteUsage(f)
			req := ""
			if takesValue(f) {
				req = " -r"
			}
			if choices, ok := choicesOf(c.name, f.Name); ok && req != "" {
				req += " -f -a " + fishQuote(strings.Join(choices, " "))
			}
			fmt.Fprintf(&b, "complete -c baton -n %s -l %s%s -d %s\n", cond, f.Name, req, fishQuote(firstLine(usage)))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
