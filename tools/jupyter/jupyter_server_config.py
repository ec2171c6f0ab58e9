# The course's notebooks store the kernel's `language_info` as JupyterLab writes it, for the Python they
# were run with. A lab on another Python version would write its own version number into every notebook
# it saves, and `git pull` of the next lesson would then refuse to overwrite them. This hook keeps the
# stored version when it is the only difference (everything you change in a notebook is saved as usual).
import json
import os


def keep_stored_python_version(model, path, contents_manager, **kwargs):
    if model.get('type') != 'notebook': return
    try:
        with open(os.path.join(contents_manager.root_dir, path), encoding='utf-8') as f:
            stored = json.load(f).get('metadata', {}).get('language_info')
    except (OSError, ValueError): return
    new = model['content'].get('metadata', {}).get('language_info')
    if stored and new and {**new, 'version': stored.get('version')} == stored:
        new['version'] = stored.get('version')


c.ContentsManager.pre_save_hook = keep_stored_python_version  # noqa: F821 (c is traitlets' config)
