// The behaviour of the offline documentation site (tools/docsite.py): the sidebar shows the current page,
// and the search box. The search index is a script in the site (assets/search-index.js), loaded the first
// time the box is used, so this works with no server features and no network: every word typed must
// appear in a page's title, a section's heading or its text.
(function () {
  'use strict';
  var sidebar = document.querySelector('.sidebar'), current = document.querySelector('.sidebar .pages .current');
  if (sidebar && current && sidebar.scrollHeight > sidebar.clientHeight) {   // only the sidebar scrolls, not the page
    var r = current.getBoundingClientRect(), box = sidebar.getBoundingClientRect();
    if (r.bottom > box.bottom) sidebar.scrollTop += r.top - box.top - sidebar.clientHeight / 2;
  }
  var root = document.body.getAttribute('data-root') || '';
  var input = document.getElementById('search-input');
  var list = document.getElementById('search-results');
  if (!input || !list) return;
  var index = null, loading = null, active = -1;

  function load() {
    if (index) return Promise.resolve(index);
    if (loading) return loading;
    loading = new Promise(function (resolve, reject) {
      var s = document.createElement('script');
      s.src = root + 'assets/search-index.js';
      s.onload = function () { index = window.SITE_SEARCH_INDEX || []; resolve(index); };
      s.onerror = reject;
      document.head.appendChild(s);
    });
    return loading;
  }

  function escapeHtml(s) {
    return s.replace(/[&<>"']/g, function (c) {
      return {'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;'}[c];
    });
  }

  function highlight(text, words) {
    var out = escapeHtml(text);
    words.forEach(function (w) {
      var re = new RegExp('(' + escapeHtml(w).replace(/[.*+?^${}()|[\]\\]/g, '\\$&') + ')', 'gi');
      out = out.replace(re, '<mark>$1</mark>');
    });
    return out;
  }

  function snippet(text, words) {
    var lower = text.toLowerCase(), at = lower.indexOf(words[0]);
    if (at < 0) return text.slice(0, 110);
    var start = Math.max(0, at - 40);
    return (start > 0 ? '…' : '') + text.slice(start, start + 120) + (start + 120 < text.length ? '…' : '');
  }

  function search(query) {
    var words = query.toLowerCase().split(/\s+/).filter(Boolean);
    if (!words.length) return [];
    var hits = [];
    index.forEach(function (page) {
      var title = page.title.toLowerCase();
      page.sections.forEach(function (sec) {
        var head = sec.h.toLowerCase(), text = sec.t.toLowerCase(), score = 0;
        for (var i = 0; i < words.length; i++) {
          var w = words[i], s = 0;
          if (title.indexOf(w) >= 0) s += 2;
          if (head.indexOf(w) >= 0) s += 6;
          if (text.indexOf(w) >= 0) s += 1 + Math.min(3, text.split(w).length - 1) * 0.5;
          if (!s) return;
          score += s;
        }
        hits.push({page: page, sec: sec, score: score + (sec.a ? 0 : 0.5)});
      });
    });
    hits.sort(function (a, b) { return b.score - a.score; });
    return hits.slice(0, 12).map(function (h) { h.words = words; return h; });
  }

  function show(hits, query) {
    active = -1;
    if (!query.trim()) { list.hidden = true; list.innerHTML = ''; return; }
    if (!hits.length) {
      list.innerHTML = '<li class="none">No matches for “' + escapeHtml(query) + '”</li>';
    } else {
      list.innerHTML = hits.map(function (h) {
        var page = (h.page.num ? h.page.num + ' · ' : '') + h.page.title;
        var href = root + h.page.url + (h.sec.a ? '#' + h.sec.a : '');
        return '<li><a href="' + escapeHtml(href) + '"><span class="where">' + highlight(h.sec.a ? h.sec.h : page, h.words) +
               '</span>' + (h.sec.a ? '<span class="page">' + escapeHtml(page) + '</span>' : '') +
               '<span class="snippet">' + highlight(snippet(h.sec.t, h.words), h.words) + '</span></a></li>';
      }).join('');
    }
    list.hidden = false;
  }

  function update() {
    var q = input.value;
    load().then(function () { show(search(q), q); });
  }

  function move(step) {
    var links = list.querySelectorAll('a');
    if (!links.length) return;
    if (active >= 0) links[active].classList.remove('active');
    active = (active + step + links.length) % links.length;
    links[active].classList.add('active');
    links[active].scrollIntoView({block: 'nearest'});
  }

  input.addEventListener('focus', function () { load(); });
  input.addEventListener('input', update);
  input.addEventListener('keydown', function (e) {
    if (e.key === 'ArrowDown') { e.preventDefault(); move(1); }
    else if (e.key === 'ArrowUp') { e.preventDefault(); move(-1); }
    else if (e.key === 'Enter') {
      var links = list.querySelectorAll('a');
      if (links.length) { e.preventDefault(); window.location.href = links[Math.max(active, 0)].href; }
    } else if (e.key === 'Escape') { input.value = ''; show([], ''); }
  });
  document.addEventListener('click', function (e) {
    if (!list.contains(e.target) && e.target !== input) list.hidden = true;
  });
  document.addEventListener('keydown', function (e) {
    if (e.key === '/' && document.activeElement !== input) { e.preventDefault(); input.focus(); }
  });
})();
