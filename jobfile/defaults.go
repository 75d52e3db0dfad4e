package jobfile

import (
	"slices"

	"go.yaml.in/yaml/v3"
)

// undefaultable are the job keys that a file's defaults cannot give: what
// makes each job a job of its own.
var undefaultable = []string{"name", "schedule", "command"}

// fileDefaults reads the top-level defaults at v: a mapping of job
// settings that every job takes unless it gives its own. They are checked
// once, as a job's settings are, and kept (as nodes) only when valid, so
// that a bad default is reported once rather than again for each job.
func (p *parser) fileDefaults(v *yaml.Node, field string) {
	if !p.kind(v, field, yaml.MappingNode, "a mapping of job settings that every job takes unless it gives its own") {
		return
	}
	before := len(p.problems)
	p.pairs(v, field, func(k, _ *yaml.Node) {
		if slices.Contains(undefaultable, k.Value) {
			p.add(k, join(field, k.Value), "a job's %s cannot be a default; each job gives its own name, schedule and command", k.Value)
		}
	})
	if len(p.problems) > before {
		return
	}
	known := slices.DeleteFunc(slices.Clone(jobKeys), func(k string) bool { return slices.Contains(undefaultable, k) })
	p.fields(v, field, known, func(string, *yaml.Node, string) {})
	if len(p.problems) > before {
		return
	}
	p.jobSettings(v, field, false)
	if len(p.problems) == before {
		p.defaults = v
	}
}

// withDefaults returns the job at n, a mapping, with the file's defaults
// added for each key that it does not give, and env merged name by name
// (the job's value winning). n itself is left as it is: a job may be an
// alias's anchor, shared with other nodes.
func (p *parser) withDefaults(n *yaml.Node) *yaml.Node {
	if p.defaults == nil || n.Kind != yaml.MappingNode {
		return n
	}
	own := make(map[string]*yaml.Node, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; k.Kind == yaml.ScalarNode {
			if _, ok := own[k.Value]; !ok {
				own[k.Value] = n.Content[i+1]
			}
		}
	}
	content := slices.Clone(n.Content)
	d := p.defaults.Content
	for i := 0; i+1 < len(d); i += 2 {
		k, v := d[i], d[i+1]
		mine, ok := own[k.Value]
		switch {
		case !ok:
			content = append(content, k, v)
		case k.Value == "env" && mine.Kind == yaml.MappingNode:
			env := mergeEnv(mine, v)
			for j := 0; j+1 < len(content); j += 2 {
				if content[j+1] == mine {
					content[j+1] = env
				}
			}
		}
	}
	c := *n
	c.Content = content
	return &c
}

// mergeEnv returns the job's env mapping with the variables of the
// defaults' env that it does not set.
func mergeEnv(job, defaults *yaml.Node) *yaml.Node {
	set := make(map[string]bool, len(job.Content)/2)
	for i := 0; i+1 < len(job.Content); i += 2 {
		set[job.Content[i].Value] = true
	}
	content := slices.Clone(job.Content)
	for i := 0; i+1 < len(defaults.Content); i += 2 {
		if k := defaults.Content[i]; !set[k.Value] {
			content = append(content, k, defaults.Content[i+1])
		}
	}
	c := *job
	c.Content = content
	return &c
}
