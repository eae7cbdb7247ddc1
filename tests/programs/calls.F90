! A known set of MPI calls from Fortran, built three times: with `use mpi`
! (-DUSE_MPI), `use mpi_f08` (-DUSE_F08) and `include 'mpif.h'` (-DUSE_MPIFH).
! Open MPI's Fortran bindings call PMPI_ directly, so no PMPI counter sees
! these calls; the program counts them itself and writes the counts where
! mpicount.c would (DIR/rank-N.txt, "MPI_Name count"), DIR being its first
! argument. Every argument is echoed, so that a test can see what reached it.
! Runs on 2 or more ranks; messages go round a ring.
program calls
#if defined(USE_F08)
  use mpi_f08
#elif defined(USE_MPI)
  use mpi
#endif
  implicit none
#if defined(USE_MPIFH)
  include 'mpif.h'
#endif
#if defined(USE_F08)
  type(MPI_Status) :: status
  type(MPI_Request) :: requests(2)
#else
  integer :: status(MPI_STATUS_SIZE)
  integer :: requests(2)
#endif
  ! mpicount.c's names, so that one comparison reads both kinds of count file.
  integer, parameter :: nnames = 19
  character(len=16), parameter :: names(nnames) = [character(len=16) :: &
      'MPI_Send', 'MPI_Recv', 'MPI_Isend', 'MPI_Irecv', 'MPI_Wait', 'MPI_Waitall', 'MPI_Test', &
      'MPI_Allreduce', 'MPI_Reduce', 'MPI_Bcast', 'MPI_Barrier', 'MPI_Alltoall', 'MPI_Allgather', &
      'MPI_Gather', 'MPI_Scatter', 'MPI_Sendrecv', 'MPI_Iprobe', 'MPI_Probe', 'MPI_Waitany']
  integer :: counts(nnames)
  integer :: rank, size, left, right, ierr, i, step, n, unit, arg_len
  logical :: flag
  integer :: ints(8), ring_in(8), ring_out(8)
  double precision :: x(16), total(16), root_total(16), checksum
  integer, allocatable :: gathered(:), spread(:), all_in(:), all_out(:)
  character(len=4096) :: arg, dir
  character(len=32) :: file_name

  counts = 0
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, size, ierr)
  left = modulo(rank - 1, size)
  right = modulo(rank + 1, size)
  allocate(gathered(size), spread(size), all_in(size), all_out(size))

  if (rank == 0) then
    print '(a,i0)', 'argc=', command_argument_count()
    do i = 1, command_argument_count()
      call get_command_argument(i, arg, arg_len)
      print '(a,i0,a,a,a)', 'argv[', i, ']=<', arg(1:arg_len), '>'
    end do
  end if
  call get_command_argument(1, dir, arg_len)
  if (arg_len == 0) dir = '.'

  ! Collectives on the world.
  ints = [(rank * 10 + i, i = 1, 8)]
  do step = 1, 3
    call MPI_Bcast(ints, 8, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
    call tally('MPI_Bcast')
  end do
  x = [(dble(rank + 1) * i, i = 1, 16)]
  do step = 1, 4
    call MPI_Allreduce(x, total, 16, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
    call tally('MPI_Allreduce')
  end do
  do step = 1, 2
    call MPI_Reduce(x, root_total, 16, MPI_DOUBLE_PRECISION, MPI_MAX, 0, MPI_COMM_WORLD, ierr)
    call tally('MPI_Reduce')
  end do
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  call tally('MPI_Barrier')
  call MPI_Allgather(rank, 1, MPI_INTEGER, gathered, 1, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  call tally('MPI_Allgather')
  call MPI_Gather(rank * rank, 1, MPI_INTEGER, gathered, 1, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  call tally('MPI_Gather')
  spread = [(100 + i, i = 1, size)]
  call MPI_Scatter(spread, 1, MPI_INTEGER, n, 1, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  call tally('MPI_Scatter')
  all_out = [(rank * size + i, i = 1, size)]
  call MPI_Alltoall(all_out, 1, MPI_INTEGER, all_in, 1, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  call tally('MPI_Alltoall')

  ! Blocking messages round the ring: rank 0 starts each lap, so no rank
  ! waits on a send that nobody receives yet.
  ring_out = ints + rank
  do step = 1, 5
    if (rank == 0) then
      call MPI_Send(ring_out, 8, MPI_INTEGER, right, step, MPI_COMM_WORLD, ierr)
      call tally('MPI_Send')
      call MPI_Recv(ring_in, 8, MPI_INTEGER, left, step, MPI_COMM_WORLD, status, ierr)
      call tally('MPI_Recv')
    else
      call MPI_Recv(ring_in, 8, MPI_INTEGER, left, step, MPI_COMM_WORLD, status, ierr)
      call tally('MPI_Recv')
      call MPI_Send(ring_out, 8, MPI_INTEGER, right, step, MPI_COMM_WORLD, ierr)
      call tally('MPI_Send')
    end if
  end do
  do step = 1, 3
    call MPI_Sendrecv(ring_out, 8, MPI_INTEGER, right, 20 + step, ring_in, 8, MPI_INTEGER, left, 20 + step, &
                      MPI_COMM_WORLD, status, ierr)
    call tally('MPI_Sendrecv')
  end do

  ! Nonblocking messages, completed one by one, then together, then by polling.
  do step = 1, 4
    call MPI_Irecv(ring_in, 8, MPI_INTEGER, left, 30 + step, MPI_COMM_WORLD, requests(1), ierr)
    call tally('MPI_Irecv')
    call MPI_Isend(ring_out, 8, MPI_INTEGER, right, 30 + step, MPI_COMM_WORLD, requests(2), ierr)
    call tally('MPI_Isend')
    call MPI_Wait(requests(1), status, ierr)
    call tally('MPI_Wait')
    call MPI_Wait(requests(2), status, ierr)
    call tally('MPI_Wait')
  end do
  do step = 1, 2
    call MPI_Irecv(ring_in, 8, MPI_INTEGER, left, 40 + step, MPI_COMM_WORLD, requests(1), ierr)
    call tally('MPI_Irecv')
    call MPI_Isend(ring_out, 8, MPI_INTEGER, right, 40 + step, MPI_COMM_WORLD, requests(2), ierr)
    call tally('MPI_Isend')
    call MPI_Waitall(2, requests, MPI_STATUSES_IGNORE, ierr)
    call tally('MPI_Waitall')
  end do
  call MPI_Irecv(ring_in, 8, MPI_INTEGER, left, 50, MPI_COMM_WORLD, requests(1), ierr)
  call tally('MPI_Irecv')
  call MPI_Isend(ring_out, 8, MPI_INTEGER, right, 50, MPI_COMM_WORLD, requests(2), ierr)
  call tally('MPI_Isend')
  flag = .false.
  do while (.not. flag)
    call MPI_Test(requests(1), flag, status, ierr)
    call tally('MPI_Test')
  end do
  call MPI_Waitany(2, requests, i, status, ierr)
  call tally('MPI_Waitany')

  ! Probing: a blocking probe, then a polled one, each before its receive.
  do step = 1, 2
    call MPI_Isend(ring_out, 8, MPI_INTEGER, right, 60 + step, MPI_COMM_WORLD, requests(2), ierr)
    call tally('MPI_Isend')
    call MPI_Probe(left, 60 + step, MPI_COMM_WORLD, status, ierr)
    call tally('MPI_Probe')
    call MPI_Recv(ring_in, 8, MPI_INTEGER, left, 60 + step, MPI_COMM_WORLD, status, ierr)
    call tally('MPI_Recv')
    call MPI_Wait(requests(2), status, ierr)
    call tally('MPI_Wait')
  end do
  call MPI_Isend(ring_out, 8, MPI_INTEGER, right, 70, MPI_COMM_WORLD, requests(2), ierr)
  call tally('MPI_Isend')
  flag = .false.
  do while (.not. flag)
    call MPI_Iprobe(left, 70, MPI_COMM_WORLD, flag, status, ierr)
    call tally('MPI_Iprobe')
  end do
  call MPI_Recv(ring_in, 8, MPI_INTEGER, left, 70, MPI_COMM_WORLD, status, ierr)
  call tally('MPI_Recv')
  call MPI_Wait(requests(2), status, ierr)
  call tally('MPI_Wait')

  ! What the calls computed; equal in every run on the same number of ranks.
  checksum = sum(total) + sum(ring_in) + sum(gathered) + n + sum(all_in)
  if (rank == 0) checksum = checksum + sum(root_total)
  print '(a,i0,a,f0.1)', 'rank ', rank, ' checksum ', checksum

  write (file_name, '(a,i0,a)') '/rank-', rank, '.txt'
  open (newunit=unit, file=trim(dir) // trim(file_name), status='replace', action='write')
  do i = 1, nnames
    if (counts(i) > 0) write (unit, '(a,1x,i0)') trim(names(i)), counts(i)
  end do
  close (unit)
  deallocate(gathered, spread, all_in, all_out)  ! what LeakSanitizer would report otherwise
  call MPI_Finalize(ierr)

contains

  subroutine tally(name)
    character(len=*), intent(in) :: name
    integer :: k
    do k = 1, nnames
      if (names(k) == name) then
        counts(k) = counts(k) + 1
        return
      end if
    end do
    stop 'tally: a name missing from names'
  end subroutine tally

end program calls
