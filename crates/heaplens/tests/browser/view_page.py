"""Drives `heaplens view`'s page in Debian's headless Chromium through Selenium, as a person
would use it: waits for the page to draw, takes a screenshot, hovers a block that FUNCTION
allocated and reads the tooltip, zooms in on it, checks the page asked the network for
nothing, and reports what a hostile name in the trace could have done (an alert, a
`window.pwned`, a script the page's policy refused) and the text the page shows. Prints one
`key=value` line per finding for the Rust test to check.

Usage: view_page.py PAGE.html SCREENSHOT.png FUNCTION
"""
import json
import pathlib
import sys
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains

page, shot, function = sys.argv[1:4]
opts = webdriver.ChromeOptions()
opts.binary_location = "/usr/bin/chromium"
for flag in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--window-size=1500,1100", "--disable-dev-shm-usage"]:
    opts.add_argument(flag)
opts.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
try:
    # Before the page's own script: an alert, or any script or inline handler the page's
    # policy refused, is noted where the checks below find it (`pwned`, `violations`).
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": """
        window.alert = (m) => { window.pwned = "alert " + m; };
        window.violations = [];
        document.addEventListener("securitypolicyviolation",
            (e) => window.violations.push(e.violatedDirective + " " + e.blockedURI));
    """})
    driver.get(pathlib.Path(page).resolve().as_uri())
    start = time.time()
    while not driver.execute_script("return !!(window.heaplens && window.heaplens.ready)"):
        if time.time() - start > 60:
            errors = [e["message"] for e in driver.get_log("browser")]
            print("ready=false", "errors=" + json.dumps(errors))
            sys.exit(1)
        time.sleep(0.1)
    print(f"ready=true load_s={time.time() - start:.2f}")
    print("blocks=%d" % driver.execute_script("return window.heaplens.blocks"))
    driver.save_screenshot(shot)

    i = driver.execute_script("return window.heaplens.findBlock(arguments[0])", function)
    print(f"block={i}")
    # Zoom on it, so that it covers pixels of its own, then hover its middle.
    driver.execute_script("window.heaplens.zoomTo(arguments[0])", i)
    time.sleep(0.5)
    x, y = driver.execute_script("return window.heaplens.blockCenter(arguments[0])", i)
    canvas = driver.find_element("id", "map")
    r = driver.execute_script("const r = arguments[0].getBoundingClientRect(); return [r.left, r.top, r.width, r.height]", canvas)
    # Selenium's offsets are from the element's centre.
    ActionChains(driver).move_to_element_with_offset(canvas, int(x - r[0] - r[2] / 2), int(y - r[1] - r[3] / 2)).perform()
    time.sleep(0.3)
    tip = driver.find_element("id", "tip")
    print("tooltip=" + json.dumps(tip.text if tip.is_displayed() else ""))
    driver.save_screenshot(shot.replace(".png", "-zoomed.png"))

    # Every resource the page loaded: only data: and blob: addresses.
    resources = driver.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    requests = []
    for entry in driver.get_log("performance"):
        msg = json.loads(entry["message"])["message"]
        if msg.get("method") == "Network.requestWillBeSent":
            url = msg["params"]["request"]["url"]
            if not url.startswith(("data:", "blob:", "file:", "about:")):
                requests.append(url)
    print("network=" + json.dumps(requests + [r for r in resources if not r.startswith(("data:", "blob:", "file:"))]))
    # What a hostile name could have done, and where the names show as text.
    print("pwned=" + json.dumps(driver.execute_script("return window.pwned === undefined ? null : String(window.pwned)")))
    print("violations=" + json.dumps(driver.execute_script("return window.violations")))
    for key, css in [("title", "#title"), ("stats", "#stats"), ("legend", "#legend"), ("report", "#report"), ("tabs", "#tabs")]:
        print(key + "=" + json.dumps(driver.find_element("css selector", css).text))
    # The legend's rows (shown text, tooltip) and whether the page fits the window's width.
    print("legend_rows=" + json.dumps(driver.execute_script(
        "return [...document.querySelectorAll('#legend div')].map((d) => [d.textContent, d.title])")))
    print("fits=" + json.dumps(driver.execute_script(
        "return document.documentElement.scrollWidth <= window.innerWidth"
        " && document.getElementById('legend').getBoundingClientRect().right <= window.innerWidth")))
    # The first flame graph's own script ran (in its sandboxed frame, under the page's policy).
    frames = driver.find_elements("css selector", "iframe.flame")
    if frames:
        driver.switch_to.frame(frames[0])
        print("flame_script=" + driver.execute_script("return typeof init"))
        driver.switch_to.default_content()
    errors = [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    print("errors=" + json.dumps(errors))
finally:
    driver.quit()
