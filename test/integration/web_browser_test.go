package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/fluxgo/fluxgo/internal/testinstance"
)

// screenshotDir is where the browser test writes its screenshots:
// $FLUX_WEB_SCREENSHOTS, else a fixed folder under the temp dir.
func screenshotDir(t *testing.T) string {
	dir := os.Getenv("FLUX_WEB_SCREENSHOTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "fluxgo-web-screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s", dir)
	return dir
}

// browser starts headless Chromium for the test (skipping the test when
// it is not installed) and returns a context that drives one tab.
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if _, err := os.Stat("/usr/bin/chromium"); err != nil {
			t.Skip("chromium is not installed (scripts/deps.sh installs Debian's chromium)")
		}
		path = "/usr/bin/chromium"
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 800),
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); acancel() })
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	ctx, tcancel := context.WithTimeout(bctx, 180*time.Second) // a hang guard (10k jobs run on a loaded machine)
	t.Cleanup(tcancel)
	return ctx
}

func shot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

func do(t *testing.T, ctx context.Context, what string, acts ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, acts...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// get runs one action that returns a value.
func get[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// waitJS waits until a JavaScript expression is true in the page.
func waitJS(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	get(t, ctx, what, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(30*time.Second)))
}

// TestWebBrowser drives the dashboard in headless Chromium against a
// real instance and flux web: log in with a token, watch a job whose
// name is HTML appear and start without a reload (from the jobs stream,
// the list fetched once), cancel it from its
// page and see it end canceled (and in flux jobs), read its eventlog
// and output, and open the nodes, queues and usage pages, with a
// screenshot of each and one at a phone's viewport.
func TestWebBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an instance")
	}
	conf := t.TempDir()
	if err := os.WriteFile(filepath.Join(conf, "archive.toml"), []byte("[archive]\nperiod = \"0.5s\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, inst: testinstance.Start(t, testinstance.Options{Size: 4, Args: []string{"--config-path", conf},
		Attrs: map[string]string{"statedir": t.TempDir()}})}
	ctx := browser(t)
	w := startWeb(e)
	dir := screenshotDir(t)
	tok := e.must("web", "token", "--expiry", "10m")

	do(t, ctx, "login page", chromedp.Navigate(w.url+"/"), chromedp.WaitVisible(chromedp.ID("token")))
	shot(t, ctx, dir, "login")
	do(t, ctx, "log in", chromedp.SendKeys(chromedp.ID("token"), tok), chromedp.Click(chromedp.CSS(`#login-form button`)),
		chromedp.WaitVisible(chromedp.ID("jobs")))

	done := e.submit("--job-name=done", "echo", "output of the finished job")
	e.waitEvent(done, "clean")
	evil := `<img src=x onerror="document.title='owned'"><script>document.title='owned'</script>`
	id := e.submit("--job-name="+evil, "sleep", "300")
	row := fmt.Sprintf(`tr[data-id="%d"]`, uint64(id))
	do(t, ctx, "the job appears and runs", chromedp.WaitVisible(chromedp.CSS(row+` td.s-RUN`)))
	// it came on the jobs stream: the page listed the jobs once (after
	// the login; before it, the listing was refused)
	if n := get(t, ctx, "listings", chromedp.Evaluate[int](`performance.getEntriesByType("resource").filter((e) => e.name.includes("/ui/v1/jobs?") && e.responseStatus === 200).length`)); n != 1 {
		t.Errorf("the jobs page listed the jobs %d times, want once (then the stream)", n)
	}
	name := get(t, ctx, "the job's name", chromedp.TextContent(chromedp.CSS(row+" td.name")))
	imgs := get(t, ctx, "elements", chromedp.Evaluate[int](`document.querySelectorAll("#jobs img, #jobs script").length`))
	title := get(t, ctx, "title", chromedp.Title())
	if name != evil || imgs != 0 || title == "owned" {
		t.Errorf("the HTML job name shows as %q (%d elements made of it, title %q)", name, imgs, title)
	}
	shot(t, ctx, dir, "jobs")

	// sorting by a column: "<" sorts before "d"
	do(t, ctx, "sort by name", chromedp.Click(chromedp.CSS(`th[data-key="name"]`)))
	if first := get(t, ctx, "first row", chromedp.TextContent(chromedp.CSS(`#jobs-body tr:first-child td.name`))); first != evil {
		t.Errorf("sorted by name, the first row is %q", first)
	}

	// the job's page: its eventlog streaming, then cancel
	do(t, ctx, "job page", chromedp.Click(chromedp.CSS(row+" a")), chromedp.WaitVisible(chromedp.ID("job-eventlog")))
	waitJS(t, ctx, "the start event", `document.getElementById("job-eventlog").textContent.includes(" start")`)
	do(t, ctx, "cancel", chromedp.Click(chromedp.ID("cancel")), chromedp.WaitReady(chromedp.CSS(`#job-eventlog[data-complete="1"]`)))
	waitJS(t, ctx, "the job canceled", `(document.querySelector('#job-info dd[data-key="result"]') || {}).textContent === "CANCELED"`)
	shot(t, ctx, dir, "job-canceled")
	if r := e.field(id, "{result}"); r != "CANCELED" {
		t.Errorf("flux jobs says the job is %q", r)
	}
	do(t, ctx, "finished job", chromedp.Navigate(w.url+fmt.Sprintf("/#job/%d", uint64(done))))
	waitJS(t, ctx, "its output", `document.getElementById("job-output").textContent.includes("output of the finished job")`)
	do(t, ctx, "its eventlog", chromedp.WaitReady(chromedp.CSS(`#job-eventlog[data-complete="1"]`)))
	if out := get(t, ctx, "eventlog", chromedp.TextContent(chromedp.ID("job-eventlog"))); !strings.Contains(out, "clean") {
		t.Errorf("the finished job's eventlog: %q", out)
	}
	shot(t, ctx, dir, "job")

	do(t, ctx, "nodes", chromedp.Navigate(w.url+"/#nodes"), chromedp.WaitVisible(chromedp.CSS(".node")))
	if n := get(t, ctx, "nodes", chromedp.Evaluate[int](`document.querySelectorAll(".node").length`)); n != 4 {
		t.Errorf("the nodes page shows %d nodes, want 4", n)
	}
	shot(t, ctx, dir, "nodes")
	do(t, ctx, "queues", chromedp.Navigate(w.url+"/#queues"), chromedp.WaitReady(chromedp.CSS("#queues tr")))
	shot(t, ctx, dir, "queues")
	do(t, ctx, "usage", chromedp.Navigate(w.url+"/#usage"), chromedp.WaitReady(chromedp.ID("usage-svg")))
	shot(t, ctx, dir, "usage")

	do(t, ctx, "phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile),
		chromedp.Navigate(w.url+"/#jobs"), chromedp.WaitVisible(chromedp.CSS("#jobs-body tr")))
	if wide := get(t, ctx, "page width", chromedp.Evaluate[int](`document.documentElement.scrollWidth`)); wide > 390 {
		t.Errorf("at a phone's width the page is %d px wide", wide)
	}
	shot(t, ctx, dir, "jobs-phone")

	// the jobs page's load time with 10k jobs (printed, not asserted)
	do(t, ctx, "desktop", chromedp.EmulateViewport(1280, 800))
	// held: the instance is quiet as the page loads (no job runs), and
	// the test need not wait for 10k jobs to run
	e.must("submit", "--cc=1-10000", "--quiet", "--urgency=hold", "true")
	n := get(t, ctx, "jobs listed", chromedp.Evaluate[int](`fetch("/ui/v1/jobs").then(r => r.json()).then(j => j.jobs.length)`, chromedp.EvalAwaitPromise))
	do(t, ctx, "reload", chromedp.Navigate(w.url+"/?load=10k#jobs"))
	waitJS(t, ctx, "the table populated", `document.body.dataset.jobsLoaded !== undefined`)
	var ph struct{ Loaded, Start, Fetch, Parse, Render float64 }
	ph.Loaded = get(t, ctx, "load time", chromedp.Evaluate[float64](`Number(document.body.dataset.jobsLoaded)`))
	ph.Start = get(t, ctx, "load start", chromedp.Evaluate[float64](`Number(document.body.dataset.jobsStart)`))
	ph.Fetch = get(t, ctx, "fetch time", chromedp.Evaluate[float64](`Number(document.body.dataset.jobsFetch)`))
	ph.Parse = get(t, ctx, "parse time", chromedp.Evaluate[float64](`Number(document.body.dataset.jobsParse)`))
	ph.Render = get(t, ctx, "render time", chromedp.Evaluate[float64](`Number(document.body.dataset.jobsRender)`))
	t.Logf("jobs page with %d jobs: table populated %.0f ms after navigation (page and stream ready at %.0f ms, then fetch %.0f ms, JSON parse %.0f ms, table %.0f ms)",
		n, ph.Loaded, ph.Start, ph.Fetch, ph.Parse, ph.Render)
}
