"""Demo trainings: small real CPU trainings that show a healthy run and the pathologies the
diagnosis names (LR too high or too low, vanishing gradients, overfitting)."""
