"""Demo trainings: small real CPU trainings that show a healthy run and the seeds' pathologies."""
