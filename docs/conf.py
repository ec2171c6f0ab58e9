"""Sphinx configuration of the course's site (`make docs`; tools/docs.py prepares the sources it reads).

Sphinx with MyST-NB and the sphinx-book-theme, the stack of Jupyter Book 1, set up to work offline: the
notebooks are built from their stored outputs (nothing is executed), MathJax is served from the site itself
(the file comes from the django-static-mathjax wheel) and the theme's fonts and icons are its own files.
"""
import shutil
from configparser import ConfigParser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_cfg = ConfigParser(delimiters=['='], interpolation=None)
_cfg.read(ROOT / 'settings.ini', encoding='utf-8')
_cfg = _cfg['DEFAULT']

project = _cfg.get('title', 'fromscratch')
author = _cfg.get('author', '')
copyright = _cfg.get('copyright', '')
release = version = _cfg.get('version', '')

extensions = ['myst_nb', 'sphinx.ext.mathjax', 'sphinx_copybutton']
root_doc = 'index'
exclude_patterns = ['_notebooks', 'pages.json', '**.ipynb_checkpoints']
nitpicky = True                   # `make docs` runs sphinx with -n -W: a broken cross-reference fails the build
suppress_warnings = []

# MyST and MyST-NB: the stored outputs, never executed
nb_execution_mode = 'off'
nb_merge_streams = True
nb_output_stderr = 'show'
nb_code_prompt_show = 'Show the code'          # the folded import cells
nb_code_prompt_hide = 'Hide the code'
myst_enable_extensions = ['dollarmath', 'amsmath', 'colon_fence', 'attrs_block', 'attrs_inline', 'html_image']
myst_heading_anchors = 4
myst_dmath_double_inline = True
nb_render_markdown_format = 'myst'

# maths: MathJax 3 from the site itself (copied in by `copy_mathjax` below), no CDN
mathjax_path = 'mathjax/tex-svg-full.js'
mathjax3_config = {'tex': {'inlineMath': [['\\(', '\\)']], 'displayMath': [['\\[', '\\]']]},
                   'svg': {'fontCache': 'global'}}

# the book theme: parts in the left sidebar, "on this page" on the right, dark mode, a phone layout
html_theme = 'sphinx_book_theme'
html_title = project
html_static_path = ['_static']
html_css_files = ['fromscratch.css']
html_js_files = ['search-math.js', 'fromscratch.js']
html_favicon = '_static/favicon.svg'
html_copy_source = False
html_show_sourcelink = False
html_last_updated_fmt = None
html_context = {'default_mode': 'auto'}     # light or dark as the reader's system says; the switch overrides it
html_theme_options = {
    'show_toc_level': 2,
    'navbar_persistent': [],          # one search field, in the sidebar (pydata's default adds a second in a header bar)
    'use_download_button': False,     # each page links its own notebook (the original, from nbs/)
    'use_fullscreen_button': False,
    'use_repository_button': False,
    'home_page_in_toc': True,
    'show_navbar_depth': 1,
    'navigation_with_keys': False,
    'pygments_light_style': 'friendly',
    'pygments_dark_style': 'monokai',
}
toc_object_entries_show_parents = 'hide'       # "on this page" lists `Value`, not fromscratch.lessons.value.Value
copybutton_exclude = '.linenos, .gp, .go'
python_display_short_literal_types = True
add_module_names = True


def _mathjax_file():
    import importlib.util
    spec = importlib.util.find_spec('mathjax')
    path = spec and Path(list(spec.submodule_search_locations)[0]) / 'static' / 'mathjax' / 'es5' / 'tex-svg-full.js'
    if not path or not path.exists():
        raise RuntimeError('MathJax is missing: `pip install django-static-mathjax` (part of `pip install -e ".[dev]"`)')
    return path


def copy_mathjax(app, exception):
    if exception or app.builder.format != 'html': return
    dest = Path(app.outdir) / '_static' / 'mathjax'
    dest.mkdir(parents=True, exist_ok=True)
    mj = _mathjax_file()
    shutil.copy2(mj, dest / mj.name)
    if (mj.parents[1] / 'LICENSE').exists(): shutil.copy2(mj.parents[1] / 'LICENSE', dest / 'LICENSE')


def one_id_per_heading(app, doctree):
    "A section keeps the id docutils gives it: MyST's heading slug is no second id."
    from docutils import nodes
    for section in doctree.findall(nodes.section):
        slug = section.get('slug')
        if slug and slug in section['ids'][1:]:
            section['ids'].remove(slug)
            doctree.ids.pop(slug, None)


def setup(app):
    _mathjax_file()                     # fail early, before the whole build
    app.connect('doctree-read', one_id_per_heading)
    app.connect('build-finished', copy_mathjax)
