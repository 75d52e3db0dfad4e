package jobfile

import (
	"fmt"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// mergeTag is the tag of a plain << key: a merge key.
const mergeTag = "!!merge"

// expander resolves a document's aliases and merge keys into the tree that
// the parser walks, as YAML means them: an alias stands for the node of its
// anchor, and a mapping's merge keys (<<: *base, or <<: [*a, *b]) add the
// keys of the mappings they name that the mapping does not give itself
// (the first named winning).
//
// An alias is not copied: the resolved tree shares its anchor's node. So a
// file whose aliases name aliases (a "billion laughs") costs no memory to
// resolve, but its tree, walked, is exponentially large; expandedSize
// measures it first, with every alias counted at each use, and a file
// that would pass MaxFileSize written out is refused before anything
// walks it.
type expander struct {
	p    *parser
	done map[*yaml.Node]*yaml.Node // each node's resolved form
	size map[*yaml.Node]int        // each resolved node's expanded size
}

// expand returns root with its aliases and merge keys resolved, root
// itself when it has none, or nil when it expands too far (reported).
func (p *parser) expand(root *yaml.Node) *yaml.Node {
	if !hasAliases(root) {
		return root
	}
	e := &expander{p: p, done: make(map[*yaml.Node]*yaml.Node), size: make(map[*yaml.Node]int)}
	r := e.resolve(root, "")
	if e.expandedSize(r) > MaxFileSize {
		p.add(root, "document", "its aliases expand the file past 4 MiB (%d bytes), the most a job file may hold written out; "+
			"is an alias expanding aliases (a billion laughs)?", MaxFileSize)
		return nil
	}
	return r
}

// hasAliases reports whether the tree at n holds an alias or a merge key.
func hasAliases(n *yaml.Node) bool {
	if n.Kind == yaml.AliasNode || (n.Kind == yaml.ScalarNode && n.Value == "<<" && n.ShortTag() == mergeTag) {
		return true
	}
	for _, c := range n.Content {
		if hasAliases(c) {
			return true
		}
	}
	return false
}

// resolve returns n, whose field is field, with its aliases and merge keys
// resolved: n itself when nothing under it changes, else a copy.
func (e *expander) resolve(n *yaml.Node, field string) *yaml.Node {
	if r, ok := e.done[n]; ok {
		return r
	}
	var r *yaml.Node
	switch n.Kind {
	case yaml.AliasNode:
		r = e.resolve(n.Alias, field)
	case yaml.MappingNode:
		r = e.mapping(n, field)
	case yaml.SequenceNode, yaml.DocumentNode:
		content := make([]*yaml.Node, len(n.Content))
		changed := false
		for i, c := range n.Content {
			sub := field + "[" + strconv.Itoa(i) + "]"
			if field == "jobs" {
				sub = jobField(i, c)
			}
			content[i] = e.resolve(c, sub)
			changed = changed || content[i] != c
		}
		r = n
		if changed {
			c := *n
			c.Content = content
			r = &c
		}
	default:
		r = n
	}
	e.done[n] = r
	return r
}

// mapping resolves mapping n: its own keys, in order, then those that its
// merge keys add.
func (e *expander) mapping(n *yaml.Node, field string) *yaml.Node {
	var own, merged []*yaml.Node
	changed := false
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		sub := join(field, "?")
		if k.Kind == yaml.ScalarNode {
			sub = join(field, k.Value)
		}
		rk, rv := e.resolve(k, sub), e.resolve(v, sub)
		if rk.Kind == yaml.ScalarNode && rk.Value == "<<" && rk.ShortTag() == mergeTag {
			changed = true
			merged = append(merged, e.sources(rv, sub)...)
			continue
		}
		changed = changed || rk != k || rv != v
		own = append(own, rk, rv)
	}
	if !changed {
		return n
	}
	has := make(map[string]bool, len(own)/2)
	for i := 0; i < len(own); i += 2 {
		if own[i].Kind == yaml.ScalarNode {
			has[own[i].Value] = true
		}
	}
	for _, m := range merged {
		for i := 0; i+1 < len(m.Content); i += 2 {
			k := m.Content[i]
			if k.Kind == yaml.ScalarNode && has[k.Value] {
				continue
			}
			if k.Kind == yaml.ScalarNode {
				has[k.Value] = true
			}
			own = append(own, k, m.Content[i+1])
		}
	}
	c := *n
	c.Content = own
	return &c
}

// sources are the mappings that v, a resolved merge key's value at field,
// names: itself, or the items of a sequence.
func (e *expander) sources(v *yaml.Node, field string) []*yaml.Node {
	const want = "a mapping or a sequence of mappings to merge"
	switch v.Kind {
	case yaml.MappingNode:
		return []*yaml.Node{v}
	case yaml.SequenceNode:
		var out []*yaml.Node
		for i, m := range v.Content {
			if m.Kind != yaml.MappingNode {
				e.p.add(m, fmt.Sprintf("%s[%d]", field, i), "want %s, not %s", want, describe(m))
				continue
			}
			out = append(out, m)
		}
		return out
	}
	e.p.add(v, field, "want %s, not %s", want, describe(v))
	return nil
}

// expandedSize is about how many bytes the tree at n, resolved, takes
// written out: each scalar's text and two bytes a node, aliases counted at
// each use. It stops counting past MaxFileSize.
func (e *expander) expandedSize(n *yaml.Node) int {
	if s, ok := e.size[n]; ok {
		return s
	}
	s := 2 + len(n.Value)
	for _, c := range n.Content {
		s = min(s+e.expandedSize(c), MaxFileSize+1)
	}
	e.size[n] = s
	return s
}
