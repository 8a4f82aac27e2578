"""Device plumbing, below every model and batch: which device a model goes to (:mod:`.choice`),
how a batch is copied there (:mod:`.transfer`), and host work made ahead of the device's
(:mod:`.ahead`)."""
