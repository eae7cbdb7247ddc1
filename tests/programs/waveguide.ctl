; A straight dielectric waveguide in 2D, lit by a continuous source (after
; Meep's first tutorial), run for a fixed time; the Ez field at the end goes
; to an HDF5 file, and the field at one point is printed as it evolves.
(set! geometry-lattice (make lattice (size 16 8 no-size)))
(set! geometry (list (make block (center 0 0) (size infinity 1 infinity)
                           (material (make dielectric (epsilon 12))))))
(set! sources (list (make source (src (make continuous-src (frequency 0.15)))
                          (component Ez) (center -7 0))))
(set! pml-layers (list (make pml (thickness 1.0))))
(set! resolution 10)
(run-until 40
           (at-beginning output-epsilon)
           (at-every 10 (lambda () (print "probe Ez " (meep-time) " " (get-field-point Ez (vector3 4 0)) "\n")))
           (at-end output-efield-z))
