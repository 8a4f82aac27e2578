"""Device plumbing, below every model and batch: which device a model goes to (:mod:`.choice`)
and host work made ahead of the device's (:mod:`.ahead`); how a tensor is copied there is a
building block of its own (:mod:`bistack.transfer`), since the encoders copy lengths too."""
