"""The page: the product every host serves, written once.

- ``page.html``: its HTML and words (the header, the tabs, every view's place and template, the Inside tab), a
  Jinja template that ``layout`` fills with what each tab's model needs.
- ``description``: what the page needs to run a model; ``captions``: what it says, and the templates it fills in.
- ``inside``: the Inside-the-model tab's pictures, written beside the page.
- ``site``: the page as a site, its data and where its files are (the static Space copies them, the app serves them).
- ``assets/``: its scripts (``page/``: host.js starts it; source.js makes every number from the model's raw outputs;
  model.js runs the model in the page or on the server; ``views/`` draw), its CSS, and the vendored runtime.
"""
