package oam_test

import (
	"bytes"
	"encoding/json"
	"html"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

// chromium finds a headless-capable Chromium: Debian's
// chromium-headless-shell (scripts/deps.sh installs it), else a full one.
func chromium() string {
	for _, n := range []string{"chromium-headless-shell", "chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	return ""
}

// rendered is what the page's script reads back from the rendered SVG:
// each node's and chain's box (x, y, width, height; a chain's fifth value
// is its line count), the computed stroke of every broken hop, the SVG's
// rendered size.
type rendered struct {
	Nodes  map[string][]float64 `json:"nodes"`
	Chains map[string][]float64 `json:"chains"`
	Broken []string             `json:"broken"`
	SVG    []float64            `json:"svg"`
}

const renderScript = `<pre id="result"></pre><script>
const out = {nodes: {}, chains: {}, broken: [], svg: null};
const r = document.querySelector('svg').getBoundingClientRect(); out.svg = [r.width, r.height];
// The boxes as laid out on the page (an element not rendered, e.g.
// display:none, has none), relative to the picture.
const box = (el) => { const b = el.getBoundingClientRect(); return [b.x - r.x, b.y - r.y, b.width, b.height]; };
for (const g of document.querySelectorAll('g.node')) out.nodes[g.id] = box(g);
for (const g of document.querySelectorAll('g.chain')) out.chains[g.id] = box(g).concat([g.querySelectorAll('line').length]);
for (const l of document.querySelectorAll('line.hop.broken')) out.broken.push(getComputedStyle(l).stroke);
document.getElementById('result').textContent = JSON.stringify(out);
</script>`

var resultRE = regexp.MustCompile(`(?s)<pre id="result">(.*?)</pre>`)

// renderInChromium renders svg in headless Chromium twice: in a page
// whose script reads the rendered geometry back (--dump-dom): every node
// drawn with a size inside the picture, every chain with lines, broken
// hops stroked red as the browser computes it; and as a screenshot
// (--screenshot): a picture that is not blank, with red in it when a hop
// is broken.
func renderInChromium(t *testing.T, svg string, nodes []string, chains []string, broken int) {
	bin := chromium()
	if bin == "" {
		t.Skip("chromium not installed (scripts/deps.sh installs chromium-headless-shell); the SVG was checked as XML")
	}
	dir := t.TempDir()
	page := filepath.Join(dir, "graph.html")
	if err := os.WriteFile(page, []byte(`<!doctype html><html><head><meta charset="utf-8"></head><body style="margin:0">`+svg+renderScript+`</body></html>`), 0o644); err != nil {
		t.Fatal(err)
	}
	// Root needs --no-sandbox; a profile of its own, so that runs do not
	// share (or lock) one.
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + filepath.Join(dir, "profile")}
	out, err := exec.Command(bin, append(base, "--dump-dom", page)...).Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom: %v", err)
	}
	m := resultRE.FindSubmatch(out)
	if m == nil {
		t.Fatalf("the page's script left no result:\n%.2000s", out)
	}
	var r rendered
	if err := json.Unmarshal([]byte(html.UnescapeString(string(m[1]))), &r); err != nil {
		t.Fatalf("result %q: %v", m[1], err)
	}
	if len(r.SVG) != 2 || r.SVG[0] <= 0 || r.SVG[1] <= 0 {
		t.Fatalf("SVG rendered %v", r.SVG)
	}
	for _, n := range nodes {
		b := r.Nodes["node-"+n]
		if len(b) != 4 || b[2] <= 0 || b[3] <= 0 || b[0] < 0 || b[1] < 0 || b[0]+b[2] > r.SVG[0] || b[1]+b[3] > r.SVG[1] {
			t.Errorf("node %s rendered at %v, not a box inside the %v picture", n, b, r.SVG)
		}
	}
	for _, c := range chains {
		b := r.Chains["chain-"+c]
		if len(b) != 5 || b[2] <= 0 || b[4] < 1 {
			t.Errorf("chain %s rendered %v: no lines", c, b)
		}
	}
	red := 0
	for _, s := range r.Broken {
		if s == "rgb(255, 0, 0)" {
			red++
		}
	}
	if len(r.Broken) != broken || red != broken {
		t.Errorf("broken hops rendered with strokes %v, want %d red", r.Broken, broken)
	}

	shot := filepath.Join(dir, "graph.png")
	w, h := int(r.SVG[0]), int(r.SVG[1])
	if out, err := exec.Command(bin, append(base, "--screenshot="+shot, "--window-size="+strconv.Itoa(w)+","+strconv.Itoa(h), page)...).CombinedOutput(); err != nil {
		t.Fatalf("chromium --screenshot: %v\n%s", err, out)
	}
	b, err := os.ReadFile(shot)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	var ink, reds int
	bd := img.Bounds()
	for y := bd.Min.Y; y < bd.Max.Y; y++ {
		for x := bd.Min.X; x < bd.Max.X; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			r, g, b = r>>8, g>>8, b>>8
			if r < 240 || g < 240 || b < 240 {
				ink++
			}
			if r > 200 && g < 60 && b < 60 {
				reds++
			}
		}
	}
	if ink < bd.Dx()*bd.Dy()/100 {
		t.Errorf("screenshot %dx%d is nearly blank: %d drawn pixels", bd.Dx(), bd.Dy(), ink)
	}
	if (reds > 0) != (broken > 0) {
		t.Errorf("screenshot has %d red pixels with %d broken hop(s)", reds, broken)
	}
	t.Logf("rendered in %s: %dx%d, %d drawn pixels, %d red", filepath.Base(bin), bd.Dx(), bd.Dy(), ink, reds)
}
