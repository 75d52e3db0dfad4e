package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/batonhq/baton"
)

const completionHelp = `
Usage: baton completion bash|zsh|fish

Prints the completion script of a shell for baton's commands and their
flags, made from the same command table and flag sets that print --help,
so that it knows every flag that this baton has. The .deb installs them;
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

func bashCompletion(w io.Writer, cmds []commandHelp) error {
	var b strings.Builder
	b.WriteString(`# bash completion for baton: made by 'baton completion bash' from the flag
# sets that print each command's --help.
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
    local flags= valued=
    case ${COMP_WORDS[1]} in
`)
	for _, c := range cmds {
		var flags, valued []string
		for _, f := range c.flags {
			flags = append(flags, "--"+f.Name)
			if takesValue(f) {
				valued = append(valued, "--"+f.Name)
			}
		}
		fmt.Fprintf(&b, "    %s)\n        flags=%q\n        valued=%q ;;\n", c.name, strings.Join(flags, " "), strings.Join(valued, " "))
	}
	b.WriteString(`    esac
    if [[ $prev == --* && " $valued " == *" $prev "* ]]; then
        COMPREPLY=($(compgen -f -- "$cur"))
        return
    fi
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$flags --help" -- "$cur"))
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
# that print each command's --help.
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
    local cmd=${words[2]}
    shift words
    (( CURRENT-- ))
    case $cmd in
`)
	for _, c := range cmds {
		fmt.Fprintf(&b, "    %s)\n        _arguments -S \\\n", c.name)
		for _, f := range c.flags {
			name, usage := flag.UnquoteUsage(f)
			if takesValue(f) {
				fmt.Fprintf(&b, "            '--%s=[%s]:%s:_files' \\\n", f.Name, zshQuote(firstLine(usage)), zshQuote(cmp.Or(name, "VALUE")))
			} else {
				fmt.Fprintf(&b, "            '--%s[%s]' \\\n", f.Name, zshQuote(firstLine(usage)))
			}
		}
		b.WriteString("            '--help[print the help]' \\\n            '*::argument:_files' ;;\n")
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
	b.WriteString("# fish completion for baton: made by 'baton completion fish' from the flag\n# sets that print each command's --help.\n")
	for _, c := range cmds {
		fmt.Fprintf(&b, "complete -c baton -n __fish_use_subcommand -f -a %s -d %s\n", c.name, fishQuote(c.synopsis))
	}
	for _, c := range cmds {
		cond := fishQuote("__fish_seen_subcommand_from " + c.name)
		for _, f := range c.flags {
			_, usage := flag.UnquoteUsage(f)
			req := ""
			if takesValue(f) {
				req = " -r"
			}
			fmt.Fprintf(&b, "complete -c baton -n %s -l %s%s -d %s\n", cond, f.Name, req, fishQuote(firstLine(usage)))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
