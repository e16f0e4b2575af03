"""Landing pages the browser checks are tried on: one that passes, one that fails."""

GOOD = """<!doctype html><html><head><title>Tidewater</title>
<meta name="description" content="Tide-aware schedules">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="canonical" href="https://tidewater.example/">
<meta property="og:title" content="Tidewater"><meta property="og:description" content="Tides">
<meta property="og:image" content="https://tidewater.example/og.png">
<meta name="twitter:card" content="summary_large_image">
<style>body{margin:0;font:18px sans-serif} button,input{min-height:48px;min-width:48px}</style>
</head><body><h1>Plan around the tide</h1>
<form method="post" action="/join"><input type="email" name="email">
<button type="submit">Join the waitlist</button></form>
<img src="http://169.254.169.254/latest/meta-data/x.png" alt="">
<script src="http://10.0.0.7/track.js"></script>
</body></html>"""
BAD = """<!doctype html><html><head><title>Wide</title></head><body>
<div style="width:900px">too wide</div><a href="/x" style="font-size:8px">tiny</a>
</body></html>"""
