package oam

import (
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/config"
)

// Graph is a picture of a domain: its nodes by role, its links, and each
// chain's path through its services (the SFs behind proxies included),
// labelled with per-SID counters and the chain's last trace.
type Graph struct {
	Domain string      `json:"domain"`
	Nodes  []GNode     `json:"nodes"`
	Links  [][2]string `json:"links"`
	Chains []GChain    `json:"chains"`
}

// GNode is one node and where the layout put it.
type GNode struct {
	Name  string `json:"name"`
	Role  string `json:"role"`
	Layer int    `json:"layer"` // distance from the first chain's headend host
	Row   int    `json:"row"`
	// Col and Band place the node: layers wrap after GraphOptions.Wrap
	// columns into bands below each other, so a long line of nodes stays
	// on a page.
	Col    int      `json:"col"`
	Band   int      `json:"band"`
	OnPath bool     `json:"on_path"`        // some chain crosses it
	SIDs   []string `json:"sids,omitempty"` // "nfv1-end 12 pkts"
}

// GChain is one chain's path.
type GChain struct {
	Name  string   `json:"name"`
	Color string   `json:"color"`
	Path  []string `json:"path"` // the nodes in order
	// From is where Path comes from: "trace" (the last segchain trace, as
	// the probe went) or "plan" (shortest paths between the hops).
	From string `json:"from"`
	// Times are the last trace's arrival times per node (µs from the
	// headend); Broken names the node of the hop the trace found broken.
	Times  map[string]float64 `json:"times,omitempty"`
	Broken string             `json:"broken,omitempty"`
	// Dim: not one of the chains asked for (GraphOptions.Highlight),
	// drawn grey.
	Dim bool `json:"dim,omitempty"`
}

// GraphOptions tune the picture.
type GraphOptions struct {
	// Highlight names the chains drawn in colour (none: all); the others
	// are grey.
	Highlight []string
	// Wrap is the number of columns before the layout starts a new band
	// (0: 12).
	Wrap int
}

var palette = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22"}

// BuildGraph lays out the domain: counters (per node, may be nil) label the
// SIDs, traces (per chain, may be nil) give each chain the path its last
// probe took and its per-hop times.
func BuildGraph(d Domain, counters map[string][]agent.SIDCounters, traces map[string]*Report, o GraphOptions) *Graph {
	g := &Graph{Domain: d.Plan.Domain}
	if o.Wrap <= 0 {
		o.Wrap = 12
	}
	hl := map[string]bool{}
	for _, c := range o.Highlight {
		hl[c] = true
	}
	adj := map[string][]string{}
	seenLink := map[[2]string]bool{}
	for _, l := range d.Plan.Links {
		k := [2]string{l.Node, l.Peer}
		if l.Peer < l.Node {
			k = [2]string{l.Peer, l.Node}
		}
		if !seenLink[k] {
			seenLink[k] = true
			g.Links = append(g.Links, k)
		}
		adj[l.Node] = append(adj[l.Node], l.Peer)
	}
	sort.Slice(g.Links, func(i, j int) bool { return g.Links[i][0]+g.Links[i][1] < g.Links[j][0]+g.Links[j][1] })
	for i, pc := range d.Plan.Chains {
		c := GChain{Name: pc.Name, Color: palette[i%len(palette)], From: "plan", Dim: len(hl) > 0 && !hl[pc.Name]}
		if c.Dim {
			c.Color = "#c8c8c8"
		}
		if r := traces[pc.Name]; r != nil && len(r.Path) > 0 {
			c.From, c.Times = "trace", map[string]float64{}
			for _, p := range r.Path {
				n, _, _ := strings.Cut(p, ":")
				if len(c.Path) == 0 || c.Path[len(c.Path)-1] != n {
					c.Path = append(c.Path, n)
				}
			}
			for _, h := range r.Hops {
				if h.AtUS != nil {
					c.Times[h.Node] = *h.AtUS
				}
			}
			if r.Broken != nil {
				c.Broken = r.Hops[r.Broken.Hop].Node
			}
		} else {
			c.Path = []string{pc.Ingress}
			for _, h := range pc.Hops {
				c.Path = appendPath(c.Path, shortest(adj, c.Path[len(c.Path)-1], h.Node))
				if s := d.Config.Services[h.Service]; s != nil && s.SRUnaware() {
					for _, l := range d.Plan.Links {
						if l.Node == s.Node && l.Iface == s.IfaceOut {
							c.Path = append(c.Path, l.Peer, s.Node)
						}
					}
				}
			}
		}
		g.Chains = append(g.Chains, c)
	}
	// Layers: breadth-first from a host next to the first chain's headend
	// (else the headend, else the first node), so chains run left to right.
	names := sortedKeys(d.Config.Nodes)
	root := ""
	if len(d.Plan.Chains) > 0 {
		root = d.Plan.Chains[0].Ingress
		for _, n := range adj[root] {
			if d.Config.Nodes[n] != nil && d.Config.Nodes[n].Role == config.RoleHost {
				root = n
				break
			}
		}
	} else if len(names) > 0 {
		root = names[0]
	}
	layer := map[string]int{root: 0}
	queue := []string{root}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		nb := append([]string(nil), adj[n]...)
		sort.Strings(nb)
		for _, m := range nb {
			if _, ok := layer[m]; !ok {
				layer[m] = layer[n] + 1
				queue = append(queue, m)
			}
		}
	}
	max := 0
	for _, l := range layer {
		if l > max {
			max = l
		}
	}
	onPath := map[string]bool{}
	for _, c := range g.Chains {
		if c.Dim {
			continue
		}
		for _, n := range c.Path {
			onPath[n] = true
		}
	}
	rows := map[int]int{}
	for _, n := range names {
		l, ok := layer[n]
		if !ok {
			l = max + 1
		}
		gn := GNode{Name: n, Role: d.Config.Nodes[n].Role, Layer: l, Row: rows[l], OnPath: onPath[n], Col: l % o.Wrap, Band: l / o.Wrap}
		rows[l]++
		for _, s := range counters[n] {
			svc := ""
			for _, si := range d.Plan.SIDs {
				if si.Node == n && si.SID == s.SID {
					svc = si.Service
				}
			}
			if svc == "" {
				svc = s.SID.String()
			}
			gn.SIDs = append(gn.SIDs, fmt.Sprintf("%s %d pkts", svc, s.Packets))
		}
		sort.Strings(gn.SIDs)
		g.Nodes = append(g.Nodes, gn)
	}
	return g
}

func appendPath(p, q []string) []string {
	if len(q) > 0 && len(p) > 0 && p[len(p)-1] == q[0] {
		q = q[1:]
	}
	return append(p, q...)
}

// shortest is a breadth-first shortest path from a to b (a, ..., b).
func shortest(adj map[string][]string, a, b string) []string {
	prev := map[string]string{a: ""}
	queue := []string{a}
	for len(queue) > 0 && a != b {
		n := queue[0]
		queue = queue[1:]
		nb := append([]string(nil), adj[n]...)
		sort.Strings(nb)
		for _, m := range nb {
			if _, ok := prev[m]; !ok {
				prev[m] = n
				queue = append(queue, m)
			}
		}
	}
	if _, ok := prev[b]; !ok {
		return []string{a, b}
	}
	var out []string
	for n := b; n != ""; n = prev[n] {
		out = append([]string{n}, out...)
		if n == a {
			break
		}
	}
	return out
}

var roleStyle = map[string][2]string{ // fill, DOT shape
	config.RoleHost: {"#e8e8e8", "box"}, config.RoleIngress: {"#c6dbef", "house"},
	config.RoleEgress: {"#c6dbef", "invhouse"}, "router": {"#f0f0f0", "circle"},
	"nfv": {"#c7e9c0", "doublecircle"}, config.RoleSF: {"#fdd0a2", "octagon"},
}

func style(role string) [2]string {
	if s, ok := roleStyle[role]; ok {
		return s
	}
	return [2]string{"#ffffff", "ellipse"}
}

// DOT renders the graph for Graphviz.
func (g *Graph) DOT() string {
	var b strings.Builder
	fmt.Fprintf(&b, "graph %q {\n  rankdir=LR;\n  node [style=filled fontname=\"Helvetica\"];\n", g.Domain)
	for _, n := range g.Nodes {
		st := style(n.Role)
		label := n.Name + "\\n(" + n.Role + ")"
		for _, s := range n.SIDs {
			label += "\\n" + s
		}
		color := "black"
		if !n.OnPath {
			color = "gray70"
		}
		fmt.Fprintf(&b, "  %q [shape=%s fillcolor=%q color=%s label=%s];\n", n.Name, st[1], st[0], color, dotq(label))
	}
	for _, l := range g.Links {
		fmt.Fprintf(&b, "  %q -- %q [color=gray80];\n", l[0], l[1])
	}
	for _, c := range g.Chains {
		for i := 0; i+1 < len(c.Path); i++ {
			label := ""
			if i == 0 {
				label = c.Name
			}
			if t, ok := c.Times[c.Path[i+1]]; ok {
				label += fmt.Sprintf(" %.1fµs", t)
			}
			color := c.Color
			if c.Broken != "" && c.Path[i+1] == c.Broken {
				color = "red"
			}
			fmt.Fprintf(&b, "  %q -- %q [dir=forward color=%q penwidth=2 label=%q fontcolor=%q];\n", c.Path[i], c.Path[i+1], color, strings.TrimSpace(label), color)
		}
		if c.Broken != "" {
			fmt.Fprintf(&b, "  %q [color=red penwidth=3];\n", c.Broken)
		}
	}
	b.WriteString("}\n")
	return b.String()
}

// dotq quotes a DOT label whose \n escapes are meant for Graphviz.
func dotq(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` }

const (
	colW, rowH, margin = 150, 120, 70
	nodeR              = 26
)

// place returns each node's centre: column by column, bands below each
// other, each band as tall as its tallest column.
func (g *Graph) place() map[string][2]float64 {
	height := map[int]int{} // band → rows
	for _, n := range g.Nodes {
		if n.Row+1 > height[n.Band] {
			height[n.Band] = n.Row + 1
		}
	}
	top := map[int]int{}
	y := 0
	for b := 0; b <= len(g.Nodes); b++ {
		top[b] = y
		y += height[b]
	}
	pos := map[string][2]float64{}
	for _, n := range g.Nodes {
		pos[n.Name] = [2]float64{float64(margin + n.Col*colW), float64(margin + (top[n.Band]+n.Row)*rowH)}
	}
	return pos
}

// SVG renders the graph as a standalone SVG picture: nodes in columns by
// their distance from the first chain's source, links grey, each chain a
// coloured arrowed line through its nodes (offset so that chains sharing a
// link stay apart) with its last trace's times, broken hops in red.
func (g *Graph) SVG() string {
	pos := g.place()
	w, h := 0.0, 0.0
	for _, p := range pos {
		x, y := p[0], p[1]
		if x > w {
			w = x
		}
		if y > h {
			h = y
		}
	}
	w += margin + 60
	h += margin + 60 + float64(14*len(g.Chains))
	var b strings.Builder
	esc := html.EscapeString
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="Helvetica,Arial,sans-serif" font-size="11">`+"\n", w, h, w, h)
	fmt.Fprintf(&b, `<title>segchain domain %s</title>`+"\n", esc(g.Domain))
	b.WriteString(`<defs>`)
	for i, c := range g.Chains {
		fmt.Fprintf(&b, `<marker id="arrow%d" markerWidth="8" markerHeight="8" markerUnits="userSpaceOnUse" refX="7" refY="4" orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="%s"/></marker>`, i, c.Color)
	}
	b.WriteString(`<marker id="arrowred" markerWidth="8" markerHeight="8" markerUnits="userSpaceOnUse" refX="7" refY="4" orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="red"/></marker></defs>` + "\n")
	for _, l := range g.Links {
		a, z := pos[l[0]], pos[l[1]]
		fmt.Fprintf(&b, `<line class="link" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#cccccc" stroke-width="6"/>`+"\n", a[0], a[1], z[0], z[1])
	}
	for i, c := range g.Chains {
		off := (float64(i) - float64(len(g.Chains)-1)/2) * 5
		fmt.Fprintf(&b, `<g class="chain" id="chain-%s" data-from="%s" data-dim="%v">`, esc(c.Name), c.From, c.Dim)
		for k := 0; k+1 < len(c.Path); k++ {
			a, z := pos[c.Path[k]], pos[c.Path[k+1]]
			color, marker := c.Color, fmt.Sprintf("arrow%d", i)
			cls := "hop"
			if c.Broken != "" && c.Path[k+1] == c.Broken {
				color, marker, cls = "red", "arrowred", "hop broken"
			}
			// Stop short of the node's circle so the arrow head shows.
			x1, y1, x2, y2 := shorten(a[0]+off, a[1]+off, z[0]+off, z[1]+off, nodeR)
			fmt.Fprintf(&b, `<line class="%s" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2" marker-end="url(#%s)"/>`, cls, x1, y1, x2, y2, color, marker)
		}
		b.WriteString("</g>\n")
	}
	for _, n := range g.Nodes {
		p := pos[n.Name]
		st := style(n.Role)
		stroke, opacity := "#333333", "1"
		if !n.OnPath {
			stroke, opacity = "#bbbbbb", "0.5"
		}
		fmt.Fprintf(&b, `<g class="node" id="node-%s" data-role="%s" opacity="%s"><circle cx="%.1f" cy="%.1f" r="%d" fill="%s" stroke="%s" stroke-width="1.5"/>`,
			esc(n.Name), esc(n.Role), opacity, p[0], p[1], nodeR, st[0], stroke)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-weight="bold">%s</text>`, p[0], p[1]+4, esc(n.Name))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#666666">%s</text>`, p[0], p[1]-nodeR-6, esc(n.Role))
		for i, s := range n.SIDs {
			fmt.Fprintf(&b, `<text class="sid" x="%.1f" y="%.1f" text-anchor="middle" font-size="9">%s</text>`, p[0], p[1]+nodeR+12+float64(i*11), esc(s))
		}
		b.WriteString("</g>\n")
	}
	// Per-hop times of the traced chains, and the legend.
	for i, c := range g.Chains {
		for k, n := range c.Path {
			t, ok := c.Times[n]
			if !ok || k == 0 {
				continue
			}
			p := pos[n]
			fmt.Fprintf(&b, `<text class="time" x="%.1f" y="%.1f" fill="%s" font-size="9">%.1fµs</text>`, p[0]+nodeR+2, p[1]-nodeR+float64(i*10), c.Color, t)
		}
		if c.Broken != "" {
			p := pos[c.Broken]
			fmt.Fprintf(&b, `<text class="broken" x="%.1f" y="%.1f" fill="red" font-weight="bold" text-anchor="middle">✗ %s</text>`, p[0], p[1]-nodeR-18, esc(c.Name))
		}
		y := h - float64(14*(len(g.Chains)-i)) - 10
		state := "path from " + c.From
		if c.Broken != "" {
			state += ", broken at " + c.Broken
		}
		fmt.Fprintf(&b, `<text class="legend" x="%d" y="%.1f" fill="%s">■ %s (%s)</text>`+"\n", margin-40, y, c.Color, esc(c.Name), esc(state))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func shorten(x1, y1, x2, y2, r float64) (float64, float64, float64, float64) {
	dx, dy := x2-x1, y2-y1
	d := dx*dx + dy*dy
	if d == 0 {
		return x1, y1, x2, y2
	}
	l := math.Sqrt(d)
	return x1 + dx/l*r, y1 + dy/l*r, x2 - dx/l*(r+2), y2 - dy/l*(r+2)
}

// TraceDir is where segchain trace keeps each chain's last report, per
// lab, for graph to label the picture with.
func TraceDir(lab string) string { return filepath.Join("/run/segchain/oam", lab) }

// SaveReport keeps r as its chain's last trace in dir.
func SaveReport(dir string, r *Report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, strings.ReplaceAll(r.Chain, "/", "_")+".json"), b, 0o644)
}

// LoadReports reads every chain's last trace kept in dir (none: empty).
func LoadReports(dir string) (map[string]*Report, error) {
	out := map[string]*Report{}
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		var r Report
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", e.Name(), err)
		}
		out[r.Chain] = &r
	}
	return out, nil
}

// PruneTraceDirs removes the kept traces of labs that are gone (lab down
// does not know of them): every directory under the traces' root whose lab
// gone reports true. Only trace writes there.
func PruneTraceDirs(gone func(lab string) bool) error {
	root := filepath.Dir(TraceDir("x"))
	ents, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range ents {
		if e.IsDir() && gone(e.Name()) {
			errs = append(errs, os.RemoveAll(filepath.Join(root, e.Name())))
		}
	}
	return errors.Join(errs...)
}
