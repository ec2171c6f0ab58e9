// Search results quote the text of each page found. Quote the lesson only (not the page's navigation or its
// "on this page" contents), and its maths as plain text: the page's TeX is typeset by MathJax only when the
// page itself is shown, so "\(\frac{a}{b}\)" would otherwise appear as it is written.
(() => {
  const plain = (tex) => tex
    .replace(/\\[()[\]]|\$\$?/g, '')
    .replace(/\\frac\{([^{}]*)\}\{([^{}]*)\}/g, '($1)/($2)')
    .replace(/\\(?:mathrm|text|mathbf|operatorname|mathit)\{([^{}]*)\}/g, '$1')
    .replace(/\\(?:left|right|,|;|!|quad)/g, ' ')
    .replace(/\\([a-zA-Z]+)/g, '$1');
  // Sphinx finds a section by its title only for a query at least half as long as the
  // title: `retain_graph` missed "What retain_graph does not do". A title in which each
  // word of the query starts a word is a hit too, linked to its section, shown first.
  const escape = (w) => w.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const sections = (query) => {
    const words = query.toLowerCase().split(/\s+/).map((w) => w.replace(/^"|"$/g, ''))
      .filter((w) => w && !w.startsWith('-'));
    const tests = words.map((w) => new RegExp('(^|[^\\w])' + escape(w), 'i'));
    const index = Search._index, found = [];
    if (!words.length || !index || !index.alltitles) return found;
    for (const [title, places] of Object.entries(index.alltitles)) {
      if (!tests.every((t) => t.test(title))) continue;
      for (const [file, id] of places) {
        const page = index.titles[file];
        const score = Math.round(Scorer.title * words.join(' ').length / title.length);
        found.push([index.docnames[file], page !== title ? `${page} > ${title}` : title,
                    id ? '#' + id : '', null, score, index.filenames[file], 'title']);
      }
    }
    return found.sort((a, b) => a[4] - b[4]);
  };
  document.addEventListener('DOMContentLoaded', () => {
    if (typeof Search === 'undefined' || !Search.htmlToText) return;
    const search = Search._performSearch;
    if (search) Search._performSearch = (query, ...rest) => {
      // a section Sphinx found by its title too moves up with the others: its own score
      // for a long title is below that of pages where the words merely occur
      const more = sections(query), found = new Set(more.map((r) => r[0] + r[2]));
      const results = search(query, ...rest).filter((r) => !found.has(r[0] + r[2]));
      return [...results, ...more];       // the list is shown from its end: these first
    };
    const toText = Search.htmlToText;
    Search.htmlToText = (html, anchor) => {
      const page = new DOMParser().parseFromString(html, 'text/html');
      page.querySelectorAll('.bd-sidebar-primary, .bd-sidebar-secondary, .bd-header-article, .prev-next-area, ' +
                            'footer, .header-article-items, .onlyprint').forEach((e) => e.remove());
      return plain(toText(page.documentElement.outerHTML, anchor));
    };
  });
})();
