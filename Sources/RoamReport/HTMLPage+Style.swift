// The page's inline style sheet and script: nothing is fetched.
extension Page {
    static let style = """
    body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px auto;max-width:1040px;color:#1d1d1f;background:#fff}
    h1{font-size:22px;margin:8px 0}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
    .tag{background:#444;color:#fff;border-radius:4px;padding:0 6px;font-size:15px}
    .verdict{font-size:14px;border-radius:4px;padding:2px 8px;vertical-align:middle}.verdict.pass{background:#d9f2df;color:#145c2a}.verdict.fail{background:#fbd9d9;color:#8a1111}
    dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:6px 0}dt{color:#666}dd{margin:0;font-family:ui-monospace,monospace;font-size:13px}
    .note{color:#7a5a00;background:#fff7da;padding:4px 8px;border-radius:4px}.note.fail{color:#8a1111;background:#fbd9d9}
    table{border-collapse:collapse;margin:6px 0;font-size:13px}th,td{border-bottom:1px solid #e4e4e4;padding:4px 10px;text-align:left}td.num{text-align:right;font-variant-numeric:tabular-nums}
    tr.pass td.result{color:#145c2a;font-weight:600}tr.fail td{background:#fdeeee}tr.fail td.result{color:#8a1111;font-weight:700}tr.differs td{background:#f3f7ff}
    figure.chart{margin:10px 0 18px}figcaption{font-size:13px;color:#333;margin-bottom:2px}svg{display:block;max-width:100%;height:auto;font-size:11px}
    .panel{fill:#fafafa;stroke:#e2e2e2}.label{fill:#444}.tick{fill:#888}.axis line{stroke:#999}.axis text{fill:#666}
    .series{fill:none;stroke-width:1.6}.series.up{stroke:#2f6fd8}.series.down{stroke:#d8572f;stroke-dasharray:5 3}.series.carried{stroke-width:1;stroke-dasharray:1.5 2;opacity:.9}.series.carried.up{stroke:#173f85}.series.carried.down{stroke:#8a3014}.series.throughput{stroke:#2f6fd8;stroke-width:2}.series.buffer{stroke:#3a9a5b}
    .band.up{fill:#d9f2df}.band.down{fill:#9a9a9a}.band.blackhole{fill:#111}.band.shade{fill:#000;opacity:.06}.band.stall{fill:#e0301e;opacity:.28}
    .marker.connect{fill:#3a9a5b}.marker.failure{fill:#c1121f;font-size:13px;font-weight:700}.marker.multipath{fill:#7b3fbf}
    rect.path{stroke:#fff;stroke-width:.5}.path.wifi{fill:#4a8fe7}.path.cellular{fill:#f09a36}.path.wiredEthernet{fill:#3a9a5b}.path.other,.path.loopback{fill:#999}.path.unsatisfied{fill:#e5e5e5}
    .pathlabel{fill:#fff;font-weight:600;pointer-events:none}.flag.expensive{fill:#f0c36a}.flag.constrained{fill:#a77bd6}.flag.ultra{fill:#d65a7b}
    .mark{stroke:#7b3fbf;stroke-width:2}.cursor{stroke:#000;stroke-width:1;opacity:.5;pointer-events:none}
    #cursor-time{position:fixed;top:8px;right:8px;background:#222;color:#fff;padding:2px 8px;border-radius:4px;font-size:12px;display:none}
    .pair{display:grid;grid-template-columns:1fr 1fr;gap:16px}.pair dl{grid-template-columns:max-content minmax(0,1fr)}.pair dd{overflow-wrap:anywhere}
    footer{margin-top:32px;color:#888;font-size:12px}
    figure.map svg{background:#fafafa;border:1px solid #e4e4e4;max-width:100%;height:auto}.obstacle{fill:#e2e2e2;stroke:#b8b8b8}
    .track{fill:none;stroke-width:2;opacity:.75}.track.outside{stroke-dasharray:3 3}.roam{fill:#fff;stroke:#222;stroke-width:1.5}
    .handover{fill:#222}.phone{fill:#222}.ap,.cell{stroke:#fff;stroke-width:1.5}.transmitter{font-size:11px;fill:#333}
    .swatch{display:inline-block;width:10px;height:10px;border-radius:2px;margin:0 3px 0 8px}.series.signal{stroke-width:1.2;opacity:.85}
    """

    /// A cursor across every chart at the time under the mouse; the page marks itself ready
    /// (or the first script error) on `<html data-roam>` for checks in a browser.
    static let script = """
    (function(){
      var root=document.documentElement;
      window.addEventListener('error',function(e){root.setAttribute('data-roam','error: '+e.message);});
      var charts=Array.prototype.slice.call(document.querySelectorAll('figure.chart svg'));
      var label=document.getElementById('cursor-time');
      function show(t){charts.forEach(function(svg){var l=+svg.dataset.left,w=+svg.dataset.width,d=+svg.dataset.duration;
        var x=(t===null||t<0||t>d)?-10:l+t/d*w;var c=svg.querySelector('.cursor');c.setAttribute('x1',x);c.setAttribute('x2',x);});
        if(t===null){label.style.display='none';}else{label.style.display='block';label.textContent=t.toFixed(2)+' s';}}
      charts.forEach(function(svg){
        svg.addEventListener('mousemove',function(e){var r=svg.getBoundingClientRect();var scale=svg.viewBox.baseVal.width/r.width;
          var x=(e.clientX-r.left)*scale;var l=+svg.dataset.left,w=+svg.dataset.width,d=+svg.dataset.duration;
          show(x<l||x>l+w?null:(x-l)/w*d);});
        svg.addEventListener('mouseleave',function(){show(null);});
      });
      if(root.getAttribute('data-roam')===null){root.setAttribute('data-roam','ready '+charts.length);}
    })();
    """
}
