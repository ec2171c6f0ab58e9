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
  document.addEventListener('DOMContentLoaded', () => {
    if (typeof Search === 'undefined' || !Search.htmlToText) return;
    const toText = Search.htmlToText;
    Search.htmlToText = (html, anchor) => {
      const page = new DOMParser().parseFromString(html, 'text/html');
      page.querySelectorAll('.bd-sidebar-primary, .bd-sidebar-secondary, .bd-header-article, .prev-next-area, ' +
                            'footer, .header-article-items, .onlyprint').forEach((e) => e.remove());
      return plain(toText(page.documentElement.outerHTML, anchor));
    };
  });
})();
